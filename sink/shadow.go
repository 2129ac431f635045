package sink

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/catalog"
)

// The SQL of a version switch: the shadow column that a side rule computes
// into, its indexes equivalent to the live column's, what would stop the
// switch, and the switch itself — one transaction that drops the live
// column and renames the shadow column and its indexes into its place.

// ShadowName returns the name of the shadow column of live computing
// version: at most 40 bytes of live, then "__v" and 8 characters of the
// version (at most 51 bytes: PostgreSQL's limit is 63).
func ShadowName(live, version string) string {
	return truncate(live, 40) + "__v" + version[:min(8, len(version))]
}

// truncate returns at most n bytes of s, cut on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// shadowTypes are the types a shadow column may have: what the functions
// write (never a name pasted from elsewhere).
var shadowTypes = regexp.MustCompile(`^(vector\([1-9][0-9]{0,4}\)|halfvec\([1-9][0-9]{0,4}\)|real\[\]|text|jsonb|json)$`)

// AddShadowColumn adds column shadow of type sqlType to table, unless it
// exists.
func AddShadowColumn(ctx context.Context, conn *pgx.Conn, table *catalog.Table, shadow, sqlType string) error {
	if !shadowTypes.MatchString(sqlType) {
		return fmt.Errorf("shadow column type %q is not one a function writes", sqlType)
	}
	add := fmt.Sprintf("ALTER TABLE %s ADD COLUMN IF NOT EXISTS %s %s", table.Identifier().Sanitize(), pgx.Identifier{shadow}.Sanitize(), sqlType)
	if _, err := conn.Exec(ctx, add); err != nil {
		return fmt.Errorf("add shadow column %s to %s: %w", shadow, table, err)
	}
	return nil
}

// IndexPlan is an index of the live column and its equivalent on the
// shadow column: built before the switch, renamed to Name by it.
type IndexPlan struct {
	Name   string // the live column's index (dropped with it)
	Shadow string // the shadow column's
	Create string // CREATE INDEX CONCURRENTLY of Shadow
}

// ShadowIndexes plans, for every index of table whose one key column is
// live, the same index on shadow: access method, operator class,
// collation, storage parameters, uniqueness and predicate. An index that
// uses live otherwise (an expression, several columns, a predicate on it)
// cannot be rebuilt: its error names it, and the switch waits.
func ShadowIndexes(ctx context.Context, conn *pgx.Conn, table *catalog.Table, live, shadow string) ([]IndexPlan, error) {
	rows, err := conn.Query(ctx, `SELECT ic.relname, am.amname, i.indisunique, i.indnkeyatts, i.indnatts, i.indkey[0] = a.attnum,
  i.indexprs IS NOT NULL, coalesce(pg_get_expr(i.indpred, i.indrelid), ''),
  coalesce(i.indpred::text LIKE '%:varattno ' || a.attnum || ' %', false) OR coalesce(i.indexprs::text LIKE '%:varattno ' || a.attnum || ' %', false),
  opc.opcname, opcn.nspname, coalesce(co.collname, ''), coalesce(con.nspname, ''), coalesce(ic.reloptions, '{}')
FROM pg_index i
JOIN pg_class ic ON ic.oid = i.indexrelid
JOIN pg_am am ON am.oid = ic.relam
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attname = $2 AND NOT a.attisdropped
JOIN pg_opclass opc ON opc.oid = i.indclass[0]
JOIN pg_namespace opcn ON opcn.oid = opc.opcnamespace
LEFT JOIN pg_collation co ON co.oid = i.indcollation[0] AND i.indcollation[0] <> 0 AND co.collname <> 'default'
LEFT JOIN pg_namespace con ON con.oid = co.collnamespace
WHERE i.indrelid = $1 AND (a.attnum = ANY (i.indkey) OR i.indexprs::text LIKE '%:varattno ' || a.attnum || ' %'
  OR i.indpred::text LIKE '%:varattno ' || a.attnum || ' %')
ORDER BY ic.relname`, table.OID, live)
	if err != nil {
		return nil, fmt.Errorf("read the indexes of %s: %w", table, err)
	}
	var plans []IndexPlan
	var name, am, opc, opcNS, coll, collNS, pred string
	var unique, first, exprs, usesLive bool
	var nkey, natts int
	var opts []string
	_, err = pgx.ForEachRow(rows, []any{&name, &am, &unique, &nkey, &natts, &first, &exprs, &pred, &usesLive, &opc, &opcNS, &coll, &collNS, &opts}, func() error {
		if nkey != 1 || natts != 1 || !first || exprs || usesLive {
			return fmt.Errorf("index %s uses column %s in a way the switch cannot rebuild (an expression, several columns or a predicate on it); drop it, or make it again after the switch",
				pgx.Identifier{name}.Sanitize(), pgx.Identifier{live}.Sanitize())
		}
		p := IndexPlan{Name: name, Shadow: truncate(name, 50) + "__next"}
		var b strings.Builder
		b.WriteString("CREATE ")
		if unique {
			b.WriteString("UNIQUE ")
		}
		fmt.Fprintf(&b, "INDEX CONCURRENTLY IF NOT EXISTS %s ON %s USING %s (%s", pgx.Identifier{p.Shadow}.Sanitize(),
			table.Identifier().Sanitize(), pgx.Identifier{am}.Sanitize(), pgx.Identifier{shadow}.Sanitize())
		if coll != "" {
			fmt.Fprintf(&b, " COLLATE %s", pgx.Identifier{collNS, coll}.Sanitize())
		}
		fmt.Fprintf(&b, " %s)", pgx.Identifier{opcNS, opc}.Sanitize())
		if len(opts) > 0 {
			var with []string
			for _, o := range opts {
				k, v, ok := strings.Cut(o, "=")
				if !ok || !reloptKey.MatchString(k) || !reloptValue.MatchString(v) {
					return fmt.Errorf("index %s: storage parameter %q cannot be copied", pgx.Identifier{name}.Sanitize(), o)
				}
				with = append(with, k+" = "+quoteLiteral(v))
			}
			fmt.Fprintf(&b, " WITH (%s)", strings.Join(with, ", "))
		}
		if pred != "" {
			// pg_get_expr prints the predicate as PostgreSQL parses it
			// back; it does not involve the live column (see above).
			fmt.Fprintf(&b, " WHERE %s", pred)
		}
		p.Create = b.String()
		plans = append(plans, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return plans, nil
}

var (
	reloptKey   = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)
	reloptValue = regexp.MustCompile(`^[A-Za-z0-9_.+-]+$`)
)

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// BuildShadowIndexes builds the planned indexes, CONCURRENTLY (outside a
// transaction: writes go on). A build that was interrupted left an invalid
// index of the same name: it is dropped and built again.
func BuildShadowIndexes(ctx context.Context, conn *pgx.Conn, plans []IndexPlan) error {
	for _, p := range plans {
		var invalid bool
		err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE c.relname = $1 AND NOT i.indisvalid AND c.relnamespace = (SELECT relnamespace FROM pg_class WHERE oid = i.indrelid))`, p.Shadow).Scan(&invalid)
		if err != nil {
			return fmt.Errorf("index %s: %w", p.Shadow, err)
		}
		if invalid {
			if err := dropIndex(ctx, conn, p.Shadow); err != nil {
				return err
			}
		}
		if _, err := conn.Exec(ctx, p.Create); err != nil {
			return fmt.Errorf("build index %s: %w", p.Shadow, err)
		}
	}
	return nil
}

// dropIndex drops the invalid index named shadow.
func dropIndex(ctx context.Context, conn *pgx.Conn, shadow string) error {
	// The schema of the index is its table's: read it from the catalog
	// rather than from the statement.
	var schema string
	if err := conn.QueryRow(ctx, `SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relname = $1 AND c.relkind = 'i' LIMIT 1`, shadow).Scan(&schema); err != nil {
		return fmt.Errorf("index %s: %w", shadow, err)
	}
	if _, err := conn.Exec(ctx, "DROP INDEX CONCURRENTLY IF EXISTS "+pgx.Identifier{schema, shadow}.Sanitize()); err != nil {
		return fmt.Errorf("drop the invalid index %s: %w", shadow, err)
	}
	return nil
}

// SwitchObstacles returns what would make the switch transaction fail, each
// with what to do: objects that depend on the live column other than its
// indexes (views, rules, constraints, triggers, policies, statistics), and
// a role that does not own the table (ALTER TABLE needs ownership).
func SwitchObstacles(ctx context.Context, conn *pgx.Conn, table *catalog.Table, live string) ([]string, error) {
	var out []string
	var owner bool
	if err := conn.QueryRow(ctx, "SELECT pg_has_role(current_user, relowner, 'USAGE') FROM pg_class WHERE oid = $1", table.OID).Scan(&owner); err != nil {
		return nil, fmt.Errorf("read the owner of %s: %w", table, err)
	}
	if !owner {
		out = append(out, fmt.Sprintf("the bridge's role does not own %s, and switching a column needs ALTER TABLE: make the role a member of the table's owner, or switch in place (rules.switch = 'in_place')", table))
	}
	rows, err := conn.Query(ctx, `SELECT DISTINCT pg_describe_object(d.classid, d.objid, d.objsubid)
FROM pg_depend d
JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid = $1 AND a.attname = $2 AND d.deptype = 'n'
  AND NOT (d.classid = 'pg_class'::regclass AND EXISTS (SELECT FROM pg_index i WHERE i.indexrelid = d.objid))
ORDER BY 1`, table.OID, live)
	if err != nil {
		return nil, fmt.Errorf("read what depends on %s.%s: %w", table, live, err)
	}
	deps, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read what depends on %s.%s: %w", table, live, err)
	}
	for _, d := range deps {
		out = append(out, fmt.Sprintf("%s depends on column %s.%s, which the switch drops: drop it, and make it again after the switch", d, table, pgx.Identifier{live}.Sanitize()))
	}
	return out, nil
}

// LockMillisSQL is an SQL expression of how long the switch transaction
// has held its lock on the target table so far, in milliseconds: from the
// moment Switch's statements began to wait for it (a lock held until the
// transaction commits).
const LockMillisSQL = `extract(epoch FROM clock_timestamp() - current_setting('pgimageai.switch_lock_start')::timestamptz) * 1000`

// Switch is the switch of a rule's live column to its shadow column, run
// in the lane's transaction with its bookkeeping: the live column is
// dropped (its indexes with it), the shadow column and its indexes take
// their names. It changes the catalog only: no row is rewritten. A lock
// it cannot take within LockTimeout fails the transaction (SQLSTATE
// 55P03), which the lane tries again, rather than queue readers behind it.
type Switch struct {
	Table        *catalog.Table
	Live, Shadow string
	Indexes      []IndexPlan
	LockTimeout  time.Duration
}

func (o Switch) Queue(b *pgx.Batch) {
	table := o.Table.Identifier().Sanitize()
	b.Queue(fmt.Sprintf("SET LOCAL lock_timeout = %d", max(o.LockTimeout.Milliseconds(), 1)))
	b.Queue("SELECT set_config('pgimageai.switch_lock_start', clock_timestamp()::text, true)")
	b.Queue(fmt.Sprintf("ALTER TABLE %s DROP COLUMN %s", table, pgx.Identifier{o.Live}.Sanitize()))
	b.Queue(fmt.Sprintf("ALTER TABLE %s RENAME COLUMN %s TO %s", table, pgx.Identifier{o.Shadow}.Sanitize(), pgx.Identifier{o.Live}.Sanitize()))
	for _, p := range o.Indexes {
		b.Queue(fmt.Sprintf("ALTER INDEX %s RENAME TO %s", pgx.Identifier{o.Table.Schema, p.Shadow}.Sanitize(), pgx.Identifier{p.Name}.Sanitize()))
	}
}

// DropShadow drops a given-up shadow column (its indexes with it), within
// LockTimeout as Switch.
type DropShadow struct {
	Table       *catalog.Table
	Shadow      string
	LockTimeout time.Duration
}

func (o DropShadow) Queue(b *pgx.Batch) {
	b.Queue(fmt.Sprintf("SET LOCAL lock_timeout = %d", max(o.LockTimeout.Milliseconds(), 1)))
	b.Queue(fmt.Sprintf("ALTER TABLE %s DROP COLUMN IF EXISTS %s", o.Table.Identifier().Sanitize(), pgx.Identifier{o.Shadow}.Sanitize()))
}
