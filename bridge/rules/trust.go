package rules

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/sink"
)

// What a table's owner may make the bridge's role run, checked whenever a
// rule is compiled (at start, on a change of configuration and at every
// re-validation). The bridge's sessions run with row_security = off and
// search_path = pg_catalog, pg_temp (internal/pgconnect), so that a read
// of a source runs no policy and no function of another role; what is left
// is refused here with a clear invalid_rule instead of failing at each read.

// TrustWriteBack names the tables whose triggers, rules and functions a
// write-back rule may fire with its UPDATEs (pgimageai run
// --trust-write-back). Names are resolved as rules' names are
// (catalog.Qualify). Call it before the first Load.
func (l *Live) TrustWriteBack(tables []string) { l.comp.trusted = tables }

// checkRowSecurity refuses table when row-level security applies to the
// session's role: its reads (or writes) fail with SQLSTATE 42501 under
// row_security = off.
func checkRowSecurity(ctx context.Context, conn *pgx.Conn, what string, table *catalog.Table) error {
	active, err := catalog.RowSecurity(ctx, conn, table.OID)
	if err != nil {
		return err
	}
	if active {
		return fmt.Errorf("%s table %s has row-level security that applies to the bridge's role; pgimageai runs no policy as its role "+
			"(it reads and writes with row_security = off), so it cannot use this table: exempt the role (ALTER ROLE … BYPASSRLS) "+
			"or disable row security (ALTER TABLE %s DISABLE ROW LEVEL SECURITY)", what, table, table.Identifier().Sanitize())
	}
	return nil
}

// checkTarget refuses a target with row-level security that applies to the
// bridge, and a write-back target whose UPDATE would run its owner's code
// (triggers, rules, functions of its constraints and indexes) unless the
// operator trusts the table.
func (c *compiler) checkTarget(ctx context.Context, conn *pgx.Conn, t *sink.Target) error {
	if !t.WriteBack {
		return checkRowSecurity(ctx, conn, "target", t.Table)
	}
	code, err := catalog.UserCode(ctx, conn, t.Table.OID)
	if err != nil || len(code) == 0 {
		return err
	}
	for _, name := range c.trusted {
		ok, err := catalog.Resolves(ctx, conn, name, t.Table.OID)
		if err != nil {
			return err
		}
		if ok {
			t.TrustCode = true
			return nil
		}
	}
	return fmt.Errorf("write-back table %s has %s, which the bridge's UPDATE of its results would run as the bridge's role; "+
		"to trust the table's owner with that, start pgimageai run with --trust-write-back %s (PGIMAGEAI_TRUST_WRITE_BACK), "+
		"or write the results to another table", t.Table, strings.Join(code, ", "), t.Table)
}
