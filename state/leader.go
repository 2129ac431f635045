package state

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The slot's leader row (pgimageai.leaders): which session leads a slot.
// Only roles that may write the bridge's state may write it, unlike an
// advisory lock, which any role that can connect may take.

// alive is true for a leaders row l whose session still exists: the same
// PID, of the same role, started at the same time. pg_stat_activity shows
// every session's PID and role to every role, and its start only to the
// same role (or pg_read_all_stats): a start it hides counts as the same.
const alive = `EXISTS (SELECT FROM pg_catalog.pg_stat_activity a
  WHERE a.pid = l.pid AND a.usesysid = l.role AND (a.backend_start IS NULL OR a.backend_start = l.backend_start))`

// claimLeaderSQL makes the session the leader of slot $1 unless another
// session that is alive leads it, in one statement: two claims at once
// serialize on the row, and the second sees the first's session alive.
const claimLeaderSQL = `INSERT INTO pgimageai.leaders AS l (slot, pid, role, backend_start)
SELECT $1, a.pid, a.usesysid, a.backend_start FROM pg_catalog.pg_stat_activity a WHERE a.pid = pg_catalog.pg_backend_pid()
ON CONFLICT (slot) DO UPDATE SET pid = excluded.pid, role = excluded.role, backend_start = excluded.backend_start,
  since = CASE WHEN l.pid = excluded.pid AND l.backend_start = excluded.backend_start THEN l.since ELSE pg_catalog.now() END
WHERE l.pid = excluded.pid AND l.backend_start = excluded.backend_start OR NOT ` + alive + `
RETURNING true`

// ClaimLeader makes q's session the leader of slot unless a live session
// leads it, and reports whether q's session leads it now. q may be a
// transaction: the claim then holds once it commits.
func ClaimLeader(ctx context.Context, q Querier, slot string) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, claimLeaderSQL, slot).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claim the leadership of slot %s: %w", slot, err)
	}
	return ok, nil
}

// LeadsSlot reports whether conn's session is slot's leader.
func LeadsSlot(ctx context.Context, conn *pgx.Conn, slot string) (bool, error) {
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pgimageai.leaders WHERE slot = $1 AND pid = pg_catalog.pg_backend_pid())`, slot).Scan(&ok); err != nil {
		return false, fmt.Errorf("read the leader of slot %s: %w", slot, err)
	}
	return ok, nil
}

// LeaderSession is the session that leads a slot.
type LeaderSession struct {
	PID         int32  // backend PID
	Role        string // its role
	Application string // its application_name ("" when hidden)
	Client      string // its client address, "local" for a Unix socket
}

// Leader returns the live session that leads slot; found is false when no
// live session does.
func Leader(ctx context.Context, conn *pgx.Conn, slot string) (s LeaderSession, found bool, err error) {
	err = conn.QueryRow(ctx, `SELECT a.pid, a.usename, coalesce(a.application_name, ''), coalesce(pg_catalog.host(a.client_addr), 'local')
FROM pgimageai.leaders l JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid AND a.usesysid = l.role
  AND (a.backend_start IS NULL OR a.backend_start = l.backend_start)
WHERE l.slot = $1`, slot).Scan(&s.PID, &s.Role, &s.Application, &s.Client)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, false, nil
	}
	if err != nil {
		return s, false, fmt.Errorf("read the leader of slot %s: %w", slot, err)
	}
	return s, true, nil
}
