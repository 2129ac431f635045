package catalog

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// What a table's owner could make the bridge's role run. The bridge's
// sessions pin row_security = off (internal/pgconnect), so no policy runs
// as the bridge: RowSecurity tells a rule whose reads would fail for that.
// A write-back rule's UPDATE of its source table fires the table's
// triggers and rules and evaluates its constraints and index expressions:
// UserCode lists what of that is the owner's code.

// RowSecurity reports whether row-level security applies to the session's
// role on table relid: policies (or their default deny) that the bridge's
// reads would otherwise run or be filtered by. With row_security = off a
// read of such a table fails with SQLSTATE 42501.
// https://www.postgresql.org/docs/current/functions-info.html (row_security_active)
func RowSecurity(ctx context.Context, q Querier, relid uint32) (bool, error) {
	var active bool
	if err := q.QueryRow(ctx, `SELECT pg_catalog.row_security_active($1::pg_catalog.oid::pg_catalog.regclass)`, relid).Scan(&active); err != nil {
		return false, fmt.Errorf("row security of table %d: %w", relid, err)
	}
	return active, nil
}

// userCodeSQL lists, for a table and its partitions, the triggers (not the
// internal ones of foreign keys), the rewrite rules (not a view's _RETURN)
// and the functions outside pg_catalog, not of an extension, that its
// constraints, indexes and column expressions call: what an UPDATE of the
// table may run as the role that updates it. pg_partition_tree gives no row
// for a table that is not partitioned: the table itself is added.
const userCodeSQL = `WITH tree AS (SELECT $1::pg_catalog.oid::pg_catalog.regclass AS relid
  UNION SELECT relid FROM pg_catalog.pg_partition_tree($1::pg_catalog.oid::pg_catalog.regclass))
SELECT 'trigger ' || pg_catalog.quote_ident(t.tgname) || ' on ' || t.tgrelid::pg_catalog.regclass::text
FROM pg_catalog.pg_trigger t WHERE t.tgrelid IN (SELECT relid FROM tree) AND NOT t.tgisinternal
UNION ALL
SELECT 'rule ' || pg_catalog.quote_ident(r.rulename) || ' on ' || r.ev_class::pg_catalog.regclass::text
FROM pg_catalog.pg_rewrite r WHERE r.ev_class IN (SELECT relid FROM tree) AND r.rulename <> '_RETURN'
UNION ALL
SELECT DISTINCT 'function ' || p.oid::pg_catalog.regprocedure::text
FROM pg_catalog.pg_depend d
JOIN pg_catalog.pg_proc p ON d.refclassid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND p.oid = d.refobjid
WHERE p.pronamespace <> 'pg_catalog'::pg_catalog.regnamespace
  AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend e WHERE e.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
    AND e.objid = p.oid AND e.deptype = 'e')
  AND ((d.classid = 'pg_catalog.pg_constraint'::pg_catalog.regclass
        AND d.objid IN (SELECT c.oid FROM pg_catalog.pg_constraint c WHERE c.conrelid IN (SELECT relid FROM tree)))
    OR (d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
        AND d.objid IN (SELECT i.indexrelid FROM pg_catalog.pg_index i WHERE i.indrelid IN (SELECT relid FROM tree)))
    OR (d.classid = 'pg_catalog.pg_attrdef'::pg_catalog.regclass
        AND d.objid IN (SELECT a.oid FROM pg_catalog.pg_attrdef a WHERE a.adrelid IN (SELECT relid FROM tree))))
ORDER BY 1`

// UserCode returns what of its owner's code an UPDATE of table relid (or of
// its partitions) would run: "trigger audit on public.photos", "rule r on
// public.photos", "function public.check_caption(text)". Empty when none.
func UserCode(ctx context.Context, q Querier, relid uint32) ([]string, error) {
	rows, err := q.Query(ctx, userCodeSQL, relid)
	if err != nil {
		return nil, fmt.Errorf("triggers and rules of table %d: %w", relid, err)
	}
	code, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("triggers and rules of table %d: %w", relid, err)
	}
	return code, nil
}

// domainCodeSQL lists the functions outside pg_catalog, not of an
// extension, that the constraints of the domains of a table's columns call
// (domains over domains and arrays of domains included): reading a row of
// the table into its row type (jsonb_populate_record(NULL::table, …), which
// the bridge uses to turn keys back into their types) or writing a value of
// such a domain checks them, as the role that reads or writes.
const domainCodeSQL = `WITH RECURSIVE types(oid) AS (
  SELECT a.atttypid FROM pg_catalog.pg_attribute a
  WHERE a.attrelid = $1::pg_catalog.oid AND a.attnum > 0 AND NOT a.attisdropped
  UNION
  SELECT x.oid FROM types JOIN pg_catalog.pg_type t ON t.oid = types.oid
  CROSS JOIN LATERAL (VALUES (t.typbasetype), (t.typelem)) AS x(oid) WHERE x.oid <> 0
)
SELECT DISTINCT 'domain ' || c.contypid::pg_catalog.regtype::text || ' (function ' || p.oid::pg_catalog.regprocedure::text || ')'
FROM types JOIN pg_catalog.pg_constraint c ON c.contypid = types.oid
JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_constraint'::pg_catalog.regclass AND d.objid = c.oid
  AND d.refclassid = 'pg_catalog.pg_proc'::pg_catalog.regclass
JOIN pg_catalog.pg_proc p ON p.oid = d.refobjid
WHERE p.pronamespace <> 'pg_catalog'::pg_catalog.regnamespace
  AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend e WHERE e.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
    AND e.objid = p.oid AND e.deptype = 'e')
ORDER BY 1`

// DomainCode returns the functions of its owner's (or of another role's)
// that checking the domains of table relid's columns would run: "domain
// public.email (function public.spy(text))". Empty when none.
func DomainCode(ctx context.Context, q Querier, relid uint32) ([]string, error) {
	rows, err := q.Query(ctx, domainCodeSQL, relid)
	if err != nil {
		return nil, fmt.Errorf("domains of table %d: %w", relid, err)
	}
	code, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("domains of table %d: %w", relid, err)
	}
	return code, nil
}

// Resolves reports whether name (Qualify) names table relid.
func Resolves(ctx context.Context, q Querier, name string, relid uint32) (bool, error) {
	var oid *uint32
	err := q.QueryRow(ctx, `SELECT pg_catalog.to_regclass($1)::pg_catalog.oid`, Qualify(name)).Scan(&oid)
	if err != nil {
		return false, fmt.Errorf("table %s: %w", name, err)
	}
	return oid != nil && *oid == relid, nil
}

// UserCodeGuard returns a statement for a write-back transaction, run
// before its UPDATEs of table: it takes the lock those UPDATEs take (ROW
// EXCLUSIVE, which CREATE TRIGGER, CREATE RULE and ALTER TABLE wait for)
// and then fails with SQLSTATE 42501 when the table has gained code of its
// owner's (UserCode) since its rule was checked. So an UPDATE of the bridge
// never fires a trigger added after the check; the refusal makes the rules
// be checked again, which reports the rule as invalid_rule.
func UserCodeGuard(table *Table) string {
	// A DO block takes no parameters: the OID is a number we format, the
	// name a quoted identifier.
	check := strings.ReplaceAll(userCodeSQL, "$1::pg_catalog.oid", fmt.Sprintf("%d::pg_catalog.oid", table.OID))
	return fmt.Sprintf(`DO $guard$ BEGIN
LOCK TABLE %s IN ROW EXCLUSIVE MODE;
IF EXISTS (%s) THEN
  RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
    MESSAGE = 'write-back table has triggers, rules or functions of its owner that the bridge will not run';
END IF;
END $guard$`, table.Identifier().Sanitize(), check)
}
