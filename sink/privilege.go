package sink

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// ErrNoPrivilege: the bridge's role may not write a target the way its
// rules need. A rule with such a target is invalid_rule, with the GRANT
// to run, rather than a lane that retries for good.
var ErrNoPrivilege = errors.New("the bridge's role may not write the target")

// checkPrivileges returns ErrNoPrivilege, with the statement that grants
// what is missing, when the session's role lacks a privilege the target's
// writes need: SELECT of the key and INSERT and UPDATE of the key and the
// result column (an upsert), and DELETE of rows (deletes, moves, truncates
// are deletes of the target's rows); a write-back target needs only UPDATE
// of the result column and SELECT of the key. Column privileges count, as
// PostgreSQL counts them; see
// https://www.postgresql.org/docs/current/functions-info.html#FUNCTIONS-INFO-ACCESS
func (t *Target) checkPrivileges(ctx context.Context, conn *pgx.Conn) error {
	type need struct{ column, privilege string }
	var needs []need
	for _, k := range t.Key {
		needs = append(needs, need{k, "SELECT"})
		if !t.WriteBack {
			needs = append(needs, need{k, "INSERT"}, need{k, "UPDATE"})
		}
	}
	needs = append(needs, need{t.Column, "UPDATE"})
	if !t.WriteBack {
		needs = append(needs, need{t.Column, "INSERT"}, need{"", "DELETE"})
	}
	cols, privs := make([]string, len(needs)), make([]string, len(needs))
	for i, n := range needs {
		cols[i], privs[i] = n.column, n.privilege
	}
	// One round trip: the privileges missing, in name order, and the role.
	var missing []string
	var role string
	err := conn.QueryRow(ctx, `SELECT coalesce(array_agg(DISTINCT n.priv ORDER BY n.priv) FILTER (WHERE NOT
    CASE WHEN n.col = '' THEN has_table_privilege($1::oid, n.priv) ELSE has_column_privilege($1::oid, n.col, n.priv) END), '{}'),
  current_user
FROM unnest($2::text[], $3::text[]) AS n(col, priv)`, t.Table.OID, cols, privs).Scan(&missing, &role)
	if err != nil {
		return fmt.Errorf("target table %s: check privileges: %w", t.Name(), err)
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w: role %s lacks %s on %s; run GRANT %s ON %s TO %s",
		ErrNoPrivilege, role, strings.Join(missing, ", "), t.Name(), strings.Join(missing, ", "), t.Table.Identifier().Sanitize(), pgx.Identifier{role}.Sanitize())
}
