package replication

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// MinServerVersion is the oldest supported server_version_num: PostgreSQL 14
// added binary tuples and logical decoding messages to pgoutput.
const MinServerVersion = 140000

// Preflight checks that the server behind conn can stream to pgimageai: its
// version is at least 14, wal_level is logical, and the session's login role
// may start a WAL sender (REPLICATION, superuser, or, on Amazon RDS, member of
// rds_replication). conn must log in as the role the stream will use.
// Failures wrap ErrVersion, ErrWALLevel or ErrPrivilege with what to do.
//
// Preflight only reads; it is safe to call at any time, but like every use of
// a *pgx.Conn not concurrently with other uses of conn.
func Preflight(ctx context.Context, conn *pgx.Conn) error {
	var (
		version           int
		walLevel, role    string
		super, replicator bool
	)
	err := conn.QueryRow(ctx, `
		SELECT current_setting('server_version_num')::int,
		       current_setting('wal_level'),
		       r.rolname, r.rolsuper,
		       r.rolreplication OR (to_regrole('rds_replication') IS NOT NULL
		           AND pg_has_role(session_user, 'rds_replication', 'MEMBER'))
		FROM pg_roles r
		WHERE r.rolname = session_user`).Scan(&version, &walLevel, &role, &super, &replicator)
	if err != nil {
		return fmt.Errorf("preflight: %w", err)
	}
	return checkPreflight(version, walLevel, role, super, replicator)
}

// checkPreflight judges the facts Preflight read.
func checkPreflight(version int, walLevel, role string, super, replicator bool) error {
	if version < MinServerVersion {
		return fmt.Errorf("%w: server_version_num is %d; pgimageai needs PostgreSQL 14 or later (binary pgoutput)",
			ErrVersion, version)
	}
	if walLevel != "logical" {
		return fmt.Errorf("%w: wal_level is %q; set wal_level = logical (postgresql.conf or ALTER SYSTEM SET wal_level = logical) and restart PostgreSQL",
			ErrWALLevel, walLevel)
	}
	if !super && !replicator {
		return fmt.Errorf("%w: role %q lacks the REPLICATION attribute; run ALTER ROLE %s REPLICATION as a superuser",
			ErrPrivilege, role, pgx.Identifier{role}.Sanitize())
	}
	return nil
}

// CheckPrimary returns ErrInRecovery, with what to do, when the server
// behind conn is a standby in recovery: the bridge writes to the source
// (publication, slot, bookkeeping), which only a primary allows.
func CheckPrimary(ctx context.Context, conn *pgx.Conn) error {
	var standby bool
	if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&standby); err != nil {
		return fmt.Errorf("preflight: %w", err)
	}
	if standby {
		return inRecovery(conn.PgConn().Conn().RemoteAddr().String())
	}
	return nil
}
