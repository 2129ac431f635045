package sink

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/catalog"
)

// The shadow column's indexes: copies of the live column's, planned from
// the catalogs and built concurrently before the switch.

// IndexPlan is the shadow copy of one index of the live column: built on the
// shadow column by BuildShadowIndexes, renamed to Original by Switch.
type IndexPlan struct {
	Table    pgx.Identifier // the target table
	Schema   string         // the schema of both indexes (the table's)
	Original string         // the live column's index
	Name     string         // the shadow index, at most 63 bytes
	Column   string         // the shadow column

	Method    string   // access method (pg_am.amname): btree, hnsw, ivfflat, …
	OpClass   string   // operator class, schema-qualified and quoted
	Options   []string // reloptions as PostgreSQL stores them: "m=16", "ef_construction=64"
	Unique    bool
	Predicate string // WHERE of a partial index as pg_get_expr prints it; "" for none

	// Create is the CREATE INDEX CONCURRENTLY IF NOT EXISTS statement.
	Create string
}

// IndexError reports indexes involving the live column that the switch
// cannot keep: DROP COLUMN would drop them and no copy of them can be built
// on the shadow column. The switch is held with its message until they are
// changed.
type IndexError struct {
	Table   string // the target table, as Table.String prints it
	Column  string // the live column
	Reasons []string
}

func (e *IndexError) Error() string {
	return fmt.Sprintf("switch of %s.%s: %s", e.Table, pgx.Identifier{e.Column}.Sanitize(), strings.Join(e.Reasons, "; "))
}

// Option keys and values of an index that are copied (anything else makes
// the index one the switch cannot keep): a key is a lower-case word, a value
// a number, kept as it is, or a word, quoted as a string literal.
var (
	optionKeyRE    = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	optionNumberRE = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)
	optionWordRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// A column reference in a pg_node_tree: {VAR :varno 1 :varattno 3 …}.
	// Attribute 0 is a whole-row reference, which references every column.
	nodeVarRE = regexp.MustCompile(`\{VAR :varno [0-9]+ :varattno (-?[0-9]+)`)
)

// indexOptions returns options ("key=value" as pg_class.reloptions and
// pg_attribute.attoptions store them) as SQL: "key = value, …".
func indexOptions(options []string) (string, error) {
	parts := make([]string, 0, len(options))
	for _, o := range options {
		k, v, ok := strings.Cut(o, "=")
		switch {
		case !ok || !optionKeyRE.MatchString(k):
			return "", fmt.Errorf("option %q", o)
		case optionNumberRE.MatchString(v):
			parts = append(parts, k+" = "+v)
		case optionWordRE.MatchString(v):
			parts = append(parts, k+" = '"+v+"'")
		default:
			return "", fmt.Errorf("option %q", o)
		}
	}
	return strings.Join(parts, ", "), nil
}

// referencesColumn reports whether a pg_node_tree (as text) references
// column attnum of the relation, or the whole row.
func referencesColumn(tree string, attnum int16) bool {
	for _, m := range nodeVarRE.FindAllStringSubmatch(tree, -1) {
		if n, err := strconv.Atoi(m[1]); err == nil && (n == int(attnum) || n == 0) {
			return true
		}
	}
	return false
}

// indexRow is what ShadowIndexes reads of one index of the table.
type indexRow struct {
	indexName
	indexShape
	indexUse
	indexMethod
}

// indexName is which index it is, and what owns or holds it.
type indexName struct {
	name, display, kind string
	constraint          string // the constraints it backs, or ""
	tablespace          string
}

// indexShape is its columns and flags as pg_index holds them.
type indexShape struct {
	valid, unique, nullsND bool
	natts, nkeyatts        int16
	key0                   int16
	option0                int16 // indoption[0]: bit 0 DESC, bit 1 NULLS FIRST
}

// indexUse is how the index involves the live column.
type indexUse struct {
	exprs, pred, predSQL string
	inKey, depends       bool // the live column is a key or INCLUDE column; the index depends on it
}

// indexMethod is how it is built: access method, operator class, collation
// and storage options.
type indexMethod struct {
	method                 string
	opcSchema, opcName     string
	opcFits                bool
	collSchema, collName   string
	reloptions, attoptions []string
}

const indexesSQL = `
SELECT ic.relname, format('%I.%I', n.nspname, ic.relname), ic.relkind::text,
  i.indisvalid, i.indisunique, COALESCE((to_jsonb(i) ->> 'indnullsnotdistinct')::bool, false),
  i.indnatts, i.indnkeyatts, i.indkey[0],
  COALESCE(i.indexprs::text, ''), COALESCE(i.indpred::text, ''), COALESCE(pg_get_expr(i.indpred, i.indrelid), ''),
  $2 = ANY (i.indkey::int2[]), EXISTS (SELECT FROM pg_depend d
    WHERE d.classid = 'pg_class'::regclass AND d.objid = i.indexrelid
      AND d.refclassid = 'pg_class'::regclass AND d.refobjid = i.indrelid AND d.refobjsubid = $2),
  am.amname, COALESCE(opcn.nspname, ''), COALESCE(opc.opcname, ''),
  COALESCE(opc.opcintype = $3 OR t.typtype = 'p', false),
  COALESCE(colln.nspname, ''), COALESCE(coll.collname, ''),
  i.indoption[0], COALESCE(ic.reloptions, '{}'), COALESCE(ia.attoptions, '{}'), COALESCE(ts.spcname, ''),
  COALESCE((SELECT string_agg(format('%s %I', CASE c.contype WHEN 'p' THEN 'primary key' WHEN 'u' THEN 'unique constraint'
      ELSE 'exclusion constraint' END, c.conname), ', ')
    FROM pg_constraint c WHERE c.conindid = i.indexrelid AND c.conrelid = i.indrelid AND c.contype IN ('p', 'u', 'x')), '')
FROM pg_index i
JOIN pg_class ic ON ic.oid = i.indexrelid
JOIN pg_namespace n ON n.oid = ic.relnamespace
JOIN pg_am am ON am.oid = ic.relam
LEFT JOIN pg_opclass opc ON opc.oid = i.indclass[0]
LEFT JOIN pg_namespace opcn ON opcn.oid = opc.opcnamespace
LEFT JOIN pg_type t ON t.oid = opc.opcintype
LEFT JOIN pg_collation coll ON coll.oid = i.indcollation[0]
LEFT JOIN pg_namespace colln ON colln.oid = coll.collnamespace
LEFT JOIN pg_attribute ia ON ia.attrelid = i.indexrelid AND ia.attnum = 1
LEFT JOIN pg_tablespace ts ON ts.oid = ic.reltablespace
WHERE i.indrelid = $1
ORDER BY ic.relname`

// attribute reads the number and type of table's column name.
func attribute(ctx context.Context, conn *pgx.Conn, table *catalog.Table, name string) (attnum int16, typ uint32, err error) {
	err = conn.QueryRow(ctx, `SELECT attnum, atttypid FROM pg_attribute WHERE attrelid = $1 AND attname = $2 AND attnum > 0 AND NOT attisdropped`,
		table.OID, name).Scan(&attnum, &typ)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, fmt.Errorf("table %s has no column %s", table, pgx.Identifier{name}.Sanitize())
	}
	if err != nil {
		return 0, 0, fmt.Errorf("column %s of %s: %w", pgx.Identifier{name}.Sanitize(), table, err)
	}
	return attnum, typ, nil
}

// ShadowIndexes plans the shadow copies of the indexes of table's live
// column, on column shadow (which must exist: see AddShadowColumn). An index
// is copied when its only column is the live column itself (one key column,
// no expression, no INCLUDE column): the copy has the same access method,
// operator class (always named, e.g. vector_cosine_ops), collation, sort
// order, uniqueness (and NULLS NOT DISTINCT), storage options (m,
// ef_construction, lists, fillfactor, …), tablespace and predicate. The
// options and the predicate are read from pg_index, pg_class, pg_am,
// pg_opclass and pg_attribute, not from pg_get_indexdef's text.
//
// Any other index that involves the live column — in an expression, beside
// other columns, in its predicate, behind a constraint, on a partitioned
// table, with an option that is not a plain word or number — makes the
// result an *IndexError naming each: DROP COLUMN would drop it, and the
// switch holds until it is changed. Indexes that are not valid (a failed
// CREATE INDEX CONCURRENTLY of someone's) are not copied: the switch drops
// them with the column.
//
// Each shadow index is named after its original, truncated, with the "__v…"
// tail of the shadow column's name (shadowIndexName), made unique in the
// schema; a name already taken by an index of the shadow column alone (a
// plan made before) is taken again, so planning twice gives the same plans.
func ShadowIndexes(ctx context.Context, conn *pgx.Conn, table *catalog.Table, live, shadow string) ([]IndexPlan, error) {
	liveNum, _, err := attribute(ctx, conn, table, live)
	if err != nil {
		return nil, err
	}
	shadowNum, shadowType, err := attribute(ctx, conn, table, shadow)
	if err != nil {
		return nil, err
	}
	rows, err := conn.Query(ctx, indexesSQL, table.OID, liveNum, shadowType)
	if err != nil {
		return nil, fmt.Errorf("indexes of %s: %w", table, err)
	}
	var indexes []indexRow
	for rows.Next() {
		var r indexRow
		if err := rows.Scan(&r.name, &r.display, &r.kind, &r.valid, &r.unique, &r.nullsND, &r.natts, &r.nkeyatts, &r.key0,
			&r.exprs, &r.pred, &r.predSQL, &r.inKey, &r.depends, &r.method, &r.opcSchema, &r.opcName, &r.opcFits,
			&r.collSchema, &r.collName, &r.option0, &r.reloptions, &r.attoptions, &r.tablespace, &r.constraint); err != nil {
			rows.Close()
			return nil, fmt.Errorf("indexes of %s: %w", table, err)
		}
		indexes = append(indexes, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("indexes of %s: %w", table, err)
	}

	col := pgx.Identifier{live}.Sanitize()
	var plans []IndexPlan
	var reasons []string
	cannot := func(r indexRow, why string) {
		reasons = append(reasons, fmt.Sprintf("index %s %s: the switch would drop it with the column and cannot build it on the new one; drop it, or change it to index %s alone, before the switch (and create it again after)", r.display, why, col))
	}
	for _, r := range indexes {
		inExpr, inPred := referencesColumn(r.exprs, liveNum), referencesColumn(r.pred, liveNum)
		if !(r.inKey || r.depends || inExpr || inPred) || !r.valid {
			continue
		}
		simple := r.natts == 1 && r.nkeyatts == 1 && r.key0 == liveNum && r.exprs == ""
		switch {
		case r.constraint != "":
			cannot(r, "backs "+r.constraint)
			continue
		case r.kind != "i":
			cannot(r, "is the index of a partitioned table (CREATE INDEX CONCURRENTLY cannot build one)")
			continue
		case inExpr || !r.inKey && !inPred: // pg_depend's word: an expression
			cannot(r, "uses "+col+" in an expression")
			continue
		case r.inKey && !simple:
			cannot(r, "has other columns beside "+col)
			continue
		case inPred:
			cannot(r, "has a predicate on "+col+" (WHERE "+r.predSQL+")")
			continue
		case !r.opcFits:
			cannot(r, fmt.Sprintf("has operator class %s, which does not fit the shadow column's type", pgx.Identifier{r.opcSchema, r.opcName}.Sanitize()))
			continue
		}
		with, err := indexOptions(r.reloptions)
		if err != nil {
			cannot(r, "has "+err.Error())
			continue
		}
		colOpts, err := indexOptions(r.attoptions)
		if err != nil {
			cannot(r, "has operator class "+err.Error())
			continue
		}
		p := IndexPlan{
			Table: table.Identifier(), Schema: table.Schema, Original: r.name, Column: shadow,
			Method: r.method, OpClass: pgx.Identifier{r.opcSchema, r.opcName}.Sanitize(), Options: r.reloptions,
			Unique: r.unique, Predicate: r.predSQL,
		}
		// "CREATE [UNIQUE] INDEX CONCURRENTLY IF NOT EXISTS name", with
		// the name found below, then this.
		var b strings.Builder
		fmt.Fprintf(&b, " ON %s USING %s (%s", p.Table.Sanitize(), pgx.Identifier{r.method}.Sanitize(), pgx.Identifier{shadow}.Sanitize())
		if r.collName != "" {
			fmt.Fprintf(&b, " COLLATE %s", pgx.Identifier{r.collSchema, r.collName}.Sanitize())
		}
		b.WriteString(" " + p.OpClass)
		if colOpts != "" {
			fmt.Fprintf(&b, " (%s)", colOpts)
		}
		// indoption: bit 0 DESC, bit 1 NULLS FIRST (only for ordered methods).
		desc, nullsFirst := r.option0&1 != 0, r.option0&2 != 0
		switch {
		case desc && nullsFirst:
			b.WriteString(" DESC")
		case desc:
			b.WriteString(" DESC NULLS LAST")
		case nullsFirst:
			b.WriteString(" NULLS FIRST")
		}
		b.WriteString(")")
		if r.nullsND {
			b.WriteString(" NULLS NOT DISTINCT")
		}
		if with != "" {
			fmt.Fprintf(&b, " WITH (%s)", with)
		}
		if r.tablespace != "" {
			fmt.Fprintf(&b, " TABLESPACE %s", pgx.Identifier{r.tablespace}.Sanitize())
		}
		if r.predSQL != "" {
			fmt.Fprintf(&b, " WHERE %s", r.predSQL)
		}
		p.Create = b.String() // completed with the name below
		plans = append(plans, p)
	}
	if len(reasons) > 0 {
		return nil, &IndexError{Table: table.String(), Column: live, Reasons: reasons}
	}

	// Names: free in the schema, or an index of the shadow column alone
	// (this plan's own index, built before); never one name twice.
	suffix := shadowIndexSuffix(shadow)
	taken := map[string]bool{}
	for i := range plans {
		p := &plans[i]
		for n := 0; ; n++ {
			if n == 100 {
				return nil, fmt.Errorf("shadow index of %s.%s: no free name like %s", table.Schema, p.Original, shadowIndexName(p.Original, suffix, 0))
			}
			name := shadowIndexName(p.Original, suffix, n)
			if taken[name] {
				continue
			}
			var ours bool
			err := conn.QueryRow(ctx, `SELECT COALESCE(i.indrelid = $2 AND i.indnatts = 1 AND i.indkey[0] = $3, false)
FROM pg_class c LEFT JOIN pg_index i ON i.indexrelid = c.oid
WHERE c.relnamespace = (SELECT relnamespace FROM pg_class WHERE oid = $2) AND c.relname = $1`,
				name, table.OID, shadowNum).Scan(&ours)
			if errors.Is(err, pgx.ErrNoRows) {
				ours = true // free
			} else if err != nil {
				return nil, fmt.Errorf("shadow index name %s: %w", name, err)
			}
			if ours {
				taken[name] = true
				p.Name = name
				unique := ""
				if p.Unique {
					unique = "UNIQUE "
				}
				p.Create = "CREATE " + unique + "INDEX CONCURRENTLY IF NOT EXISTS " + pgx.Identifier{name}.Sanitize() + p.Create
				break
			}
		}
	}
	return plans, nil
}

// BuildShadowIndexes builds the shadow indexes of plans, one after the
// other, with CREATE INDEX CONCURRENTLY: outside a transaction (conn must
// not be in one), without blocking the table's writers; each waits for the
// transactions that use the table. An index of a plan's name that is not
// valid — a build interrupted by a crash, a cancel, or a unique index that
// met duplicates — is dropped (DROP INDEX CONCURRENTLY) and built again; a
// valid one is kept. A failed build leaves its invalid index for the next
// call, or for DropShadow, to remove. After each build the index is checked:
// valid, and an index of the shadow column alone.
func BuildShadowIndexes(ctx context.Context, conn *pgx.Conn, plans []IndexPlan) error {
	for _, p := range plans {
		idx := pgx.Identifier{p.Schema, p.Name}.Sanitize()
		exists, valid, err := shadowIndexState(ctx, conn, p)
		if err != nil {
			return err
		}
		if exists && valid {
			continue
		}
		if exists {
			if _, err := conn.Exec(ctx, "DROP INDEX CONCURRENTLY IF EXISTS "+idx); err != nil {
				return fmt.Errorf("drop invalid shadow index %s: %w", idx, err)
			}
		}
		if _, err := conn.Exec(ctx, p.Create); err != nil {
			return fmt.Errorf("build shadow index %s (copy of %s): %w", idx, pgx.Identifier{p.Schema, p.Original}.Sanitize(), err)
		}
		exists, valid, err = shadowIndexState(ctx, conn, p)
		if err != nil {
			return err
		}
		if !exists || !valid {
			return fmt.Errorf("shadow index %s (copy of %s) is not valid after CREATE INDEX CONCURRENTLY", idx, pgx.Identifier{p.Schema, p.Original}.Sanitize())
		}
	}
	return nil
}

// shadowIndexState reads whether p's index exists and is valid; a relation
// of its name that is not an index of p's shadow column alone is an error.
func shadowIndexState(ctx context.Context, conn *pgx.Conn, p IndexPlan) (exists, valid bool, err error) {
	idx := pgx.Identifier{p.Schema, p.Name}.Sanitize()
	var ours bool
	err = conn.QueryRow(ctx, `SELECT COALESCE(i.indisvalid, false),
  COALESCE(i.indrelid = to_regclass($3) AND i.indnatts = 1 AND a.attname = $4, false)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_index i ON i.indexrelid = c.oid
LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
WHERE n.nspname = $1 AND c.relname = $2`, p.Schema, p.Name, p.Table.Sanitize(), p.Column).Scan(&valid, &ours)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("shadow index %s: %w", idx, err)
	}
	if !ours {
		return false, false, fmt.Errorf("shadow index %s: a relation of that name exists and is no index of %s.%s alone", idx, p.Table.Sanitize(), pgx.Identifier{p.Column}.Sanitize())
	}
	return true, valid, nil
}
