package sink

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// ErrNoPrivilege: the bridge's role may not write a target the way its
// rules need. A rule with such a target is invalid_rule, with the GRANT
// to run, rather than a lane that retries for good.
var ErrNoPrivilege = fmt.Errorf("the bridge's role may not write the target")

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
	var missing []string
	seen := map[string]bool{}
	for _, n := range needs {
		var ok bool
		var err error
		if n.column == "" {
			err = conn.QueryRow(ctx, "SELECT has_table_privilege($1::oid, $2)", t.Table.OID, n.privilege).Scan(&ok)
		} else {
			err = conn.QueryRow(ctx, "SELECT has_column_privilege($1::oid, $2::text, $3)", t.Table.OID, n.column, n.privilege).Scan(&ok)
		}
		if err != nil {
			return fmt.Errorf("target table %s: check privileges: %w", t.Name(), err)
		}
		if !ok && !seen[n.privilege] {
			seen[n.privilege] = true
			missing = append(missing, n.privilege)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	var role string
	if err := conn.QueryRow(ctx, "SELECT current_user").Scan(&role); err != nil {
		return fmt.Errorf("target table %s: check privileges: %w", t.Name(), err)
	}
	return fmt.Errorf("%w: role %s lacks %s on %s; run GRANT %s ON %s TO %s",
		ErrNoPrivilege, role, strings.Join(missing, ", "), t.Name(), strings.Join(missing, ", "), t.Table.Identifier().Sanitize(), pgx.Identifier{role}.Sanitize())
}
