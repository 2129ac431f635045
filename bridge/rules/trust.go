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

// TrustTables names the tables whose triggers, rules and functions a
// write-back rule may fire with its UPDATEs (pgimageai run
// --trust-tables). Names are resolved as rules' names are
// (catalog.Qualify). Call it before the first Load.
func (l *Live) TrustTables(tables []string) { l.comp.trusted = tables }

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
	trusted, err := c.trusts(ctx, conn, t.Table)
	if err != nil {
		return err
	}
	if trusted {
		t.TrustCode = true
		return nil
	}
	return fmt.Errorf("write-back table %s has %s, which the bridge's UPDATE of its results would run as the bridge's role; "+
		"to trust the table's owner with that, start pgimageai run with --trust-tables %s (PGIMAGEAI_TRUST_TABLES), "+
		"or write the results to another table", t.Table, strings.Join(code, ", "), t.Table)
}

// checkDomains refuses a table whose columns' domains check functions
// outside pg_catalog (catalog.DomainCode), unless the operator trusts the
// table: the bridge's reads of keys and its writes of them run those checks.
func (c *compiler) checkDomains(ctx context.Context, conn *pgx.Conn, what string, table *catalog.Table) error {
	code, err := catalog.DomainCode(ctx, conn, table.OID)
	if err != nil || len(code) == 0 {
		return err
	}
	trusted, err := c.trusts(ctx, conn, table)
	if err != nil || trusted {
		return err
	}
	return fmt.Errorf("%s table %s has columns of %s, whose checks the bridge would run as its role when it reads or writes keys; "+
		"to trust the table's owner with that, start pgimageai run with --trust-tables %s (PGIMAGEAI_TRUST_TABLES)",
		what, table, strings.Join(code, ", "), table)
}

// trusts reports whether the operator trusts table (--trust-tables).
func (c *compiler) trusts(ctx context.Context, conn *pgx.Conn, table *catalog.Table) (bool, error) {
	for _, name := range c.trusted {
		ok, err := catalog.Resolves(ctx, conn, name, table.OID)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}
