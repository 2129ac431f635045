package sink

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/catalog"
)

// What would make a switch transaction fail, said before it runs.

// dependentsSQL lists what depends on column $2 of table $1 (pg_depend),
// one row per object, but the column's own indexes (ShadowIndexes' to
// judge): its kind, how PostgreSQL describes it, and whether DROP COLUMN
// would drop it with the column (an automatic dependency) rather than fail.
const dependentsSQL = `
SELECT kind, what, bool_or(deptype = 'a') FROM (
  SELECT d.deptype,
    CASE
      WHEN d.classid = 'pg_rewrite'::regclass THEN
        (SELECT CASE WHEN r.ev_class = $1 THEN 'rule' WHEN c.relkind = 'm' THEN 'materialized view' ELSE 'view' END
         FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class WHERE r.oid = d.objid)
      WHEN d.classid = 'pg_attrdef'::regclass THEN
        (SELECT CASE WHEN ad.adnum = $2 THEN 'default' ELSE 'generated' END FROM pg_attrdef ad WHERE ad.oid = d.objid)
      WHEN d.classid = 'pg_constraint'::regclass THEN
        (SELECT CASE WHEN c.conrelid = $1 THEN 'constraint' ELSE 'foreign key' END FROM pg_constraint c WHERE c.oid = d.objid)
      ELSE 'other'
    END AS kind,
    CASE
      WHEN d.classid = 'pg_rewrite'::regclass THEN
        (SELECT CASE WHEN r.ev_class = $1 THEN format('rule %I', r.rulename) ELSE format('%I.%I', n.nspname, c.relname) END
         FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class JOIN pg_namespace n ON n.oid = c.relnamespace WHERE r.oid = d.objid)
      WHEN d.classid = 'pg_attrdef'::regclass THEN
        (SELECT format('%I', a.attname) FROM pg_attrdef ad JOIN pg_attribute a ON a.attrelid = ad.adrelid AND a.attnum = ad.adnum WHERE ad.oid = d.objid)
      ELSE pg_describe_object(d.classid, d.objid, d.objsubid)
    END AS what
  FROM pg_depend d
  WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid = $1 AND d.refobjsubid = $2
    AND NOT (d.classid = 'pg_class'::regclass
      AND EXISTS (SELECT FROM pg_index i WHERE i.indexrelid = d.objid AND i.indrelid = $1))
) dep
GROUP BY kind, what
ORDER BY kind, what`

// SwitchObstacles returns why the switch transaction of table's live column
// would fail, or would change more than the column, each reason saying what
// to do; none when it can run. The reasons are:
//   - objects that depend on the live column (pg_depend) other than its own
//     indexes (ShadowIndexes judges those): views, materialized views and
//     rules that read it, triggers fired by its updates, policies, foreign
//     keys of other tables and publication column lists make DROP COLUMN
//     fail; constraints, statistics objects, generated columns computed
//     from it and its own default would be dropped with it;
//   - the live column being NOT NULL (the new column is not) or inherited
//     from a parent table (it cannot be dropped alone);
//   - the connected role not owning the table (ALTER TABLE needs the
//     owner's rights: membership in the owning role).
func SwitchObstacles(ctx context.Context, conn *pgx.Conn, table *catalog.Table, live string) ([]string, error) {
	col := pgx.Identifier{live}.Sanitize()
	var attnum int16
	var notNull, inherited, owner bool
	var role, ownerName string
	err := conn.QueryRow(ctx, `SELECT a.attnum, a.attnotnull, a.attinhcount > 0,
  pg_has_role(current_user, c.relowner, 'USAGE'), current_user, pg_get_userbyid(c.relowner)
FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
WHERE c.oid = $1 AND a.attname = $2 AND a.attnum > 0 AND NOT a.attisdropped`, table.OID, live).
		Scan(&attnum, &notNull, &inherited, &owner, &role, &ownerName)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("table %s has no column %s", table, col)
	}
	if err != nil {
		return nil, fmt.Errorf("column %s of %s: %w", col, table, err)
	}
	var reasons []string
	if !owner {
		reasons = append(reasons, fmt.Sprintf("role %s does not own table %s (%s does): the switch's ALTER TABLE needs the owner's rights; run GRANT %s TO %s, or make %s the owner",
			pgx.Identifier{role}.Sanitize(), table, pgx.Identifier{ownerName}.Sanitize(), pgx.Identifier{ownerName}.Sanitize(), pgx.Identifier{role}.Sanitize(), pgx.Identifier{role}.Sanitize()))
	}
	if inherited {
		reasons = append(reasons, fmt.Sprintf("column %s of %s is inherited from a parent table: it cannot be dropped from %s alone; write the results to a table of their own", col, table, table))
	}
	if notNull {
		reasons = append(reasons, fmt.Sprintf("column %s of %s is NOT NULL and the new column would not be: run ALTER TABLE %s ALTER COLUMN %s DROP NOT NULL (and set it again after the switch)",
			col, table, table.Identifier().Sanitize(), col))
	}
	rows, err := conn.Query(ctx, dependentsSQL, table.OID, attnum)
	if err != nil {
		return nil, fmt.Errorf("what depends on %s.%s: %w", table, col, err)
	}
	defer rows.Close()
	for rows.Next() {
		var kind, what string
		var dropped bool
		if err := rows.Scan(&kind, &what, &dropped); err != nil {
			return nil, fmt.Errorf("what depends on %s.%s: %w", table, col, err)
		}
		reasons = append(reasons, dependentReason(table.String(), col, kind, what, dropped))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("what depends on %s.%s: %w", table, col, err)
	}
	return reasons, nil
}

// dependentReason says why an object depending on col of table holds the
// switch, and what to do.
func dependentReason(table, col, kind, what string, dropped bool) string {
	switch kind {
	case "view", "materialized view":
		return fmt.Sprintf("%s %s reads column %s of %s, so the switch's DROP COLUMN would fail: drop the %s before the switch and create it again after (or make it not read %s)",
			kind, what, col, table, kind, col)
	case "generated":
		effect := "would fail"
		if dropped {
			effect = "would drop it"
		}
		return fmt.Sprintf("generated column %s of %s is computed from column %s: the switch's DROP COLUMN %s; drop it (or its expression) before the switch and add it again after", what, table, col, effect)
	case "default":
		return fmt.Sprintf("column %s of %s has a default, which the new column would not have: drop it (ALTER COLUMN %s DROP DEFAULT) before the switch and set it again after", col, table, col)
	}
	if dropped {
		return fmt.Sprintf("%s depends on column %s of %s and the switch's DROP COLUMN would drop it: drop it before the switch and create it again on the new column after", what, col, table)
	}
	return fmt.Sprintf("%s depends on column %s of %s, so the switch's DROP COLUMN would fail: drop it before the switch and create it again after", what, col, table)
}
