package sink

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/catalog"
)

// The SQL side of a version switch (see the design of versioned results): a
// rule's new version is computed into a shadow column of the target table,
// beside the live column, with copies of the live column's indexes built
// concurrently; then ONE transaction of the table's lane drops the live
// column, renames the shadow column to the live column's name and each
// shadow index to its original's name (Switch). DropShadow undoes the side
// work. Every identifier is quoted with pgx.Identifier; the only SQL text
// taken from the catalogs is an index predicate as pg_get_expr prints it.

// Shadow column and index names.
const (
	shadowColumnMax = 40    // bytes of the live column's name kept in a shadow column's
	shadowMark      = "__v" // between the kept name and the version
	versionChars    = 8     // characters of the version in a shadow name
	identMax        = 63    // NAMEDATALEN - 1: PostgreSQL truncates longer names
)

// ShadowName returns the name of the shadow column that holds version of the
// live column's results: the live column's name truncated to at most 40
// bytes (on a UTF-8 character boundary), "__v", and the first 8 characters
// of version. It is at most 51 bytes, below PostgreSQL's 63.
func ShadowName(live, version string) string {
	if len(version) > versionChars {
		version = version[:versionChars]
	}
	return truncateUTF8(live, shadowColumnMax) + shadowMark + version
}

// truncateUTF8 returns the longest prefix of s of at most n bytes that ends
// on a character boundary.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// shadowIndexSuffix is what a shadow index's name ends with: the "__v…" part
// of the shadow column's name, so that the indexes of one switch are
// recognisable; "__shadow" for a shadow column named otherwise.
func shadowIndexSuffix(shadow string) string {
	if i := strings.LastIndex(shadow, shadowMark); i >= 0 && len(shadow)-i <= len(shadowMark)+versionChars {
		return shadow[i:]
	}
	return "__shadow"
}

// shadowIndexName returns the n-th candidate name of the shadow copy of
// index original: original truncated so that the whole is at most 63 bytes,
// then "_<n>" for n > 0, then suffix.
func shadowIndexName(original, suffix string, n int) string {
	tail := suffix
	if n > 0 {
		tail = "_" + strconv.Itoa(n) + suffix
	}
	return truncateUTF8(original, identMax-len(tail)) + tail
}

// Shadow column types. A type is never pasted into SQL as given: it must be
// one of these, and a pgvector type's schema is quoted again.
var (
	vectorTypeRE = regexp.MustCompile(`^(?:("(?:[^"]|"")+"|[a-z_][a-z0-9_$]*)\.)?(vector|halfvec)\(([1-9][0-9]{0,4})\)$`)
	plainTypes   = map[string]bool{"real[]": true, "text": true, "jsonb": true, "json": true}
)

// columnType is a validated shadow column type.
type columnType struct {
	sql  string // the type as SQL, identifiers quoted
	base string // the type without its modifier, for to_regtype
	mod  int32  // its atttypmod: the dimension of a pgvector type, else -1
}

// parseShadowType validates a shadow column's type as format_type prints it:
// vector(n) or halfvec(n) (pgvector, possibly schema-qualified), real[],
// text, jsonb or json.
func parseShadowType(sqlType string) (columnType, error) {
	if plainTypes[sqlType] {
		return columnType{sql: sqlType, base: sqlType, mod: -1}, nil
	}
	m := vectorTypeRE.FindStringSubmatch(sqlType)
	if m == nil {
		return columnType{}, fmt.Errorf("shadow column type %q: want vector(n), halfvec(n), real[], text, jsonb or json", sqlType)
	}
	dim, _ := strconv.Atoi(m[3]) // at most 5 digits
	base := m[2]
	if schema := m[1]; schema != "" {
		if strings.HasPrefix(schema, `"`) {
			schema = strings.ReplaceAll(schema[1:len(schema)-1], `""`, `"`)
		}
		base = pgx.Identifier{schema}.Sanitize() + "." + base
	}
	return columnType{sql: fmt.Sprintf("%s(%d)", base, dim), base: base, mod: int32(dim)}, nil
}

// ShadowType returns the type of the shadow column of live's column for a
// new version: for a pgvector column, the same type with dim dimensions (the
// new model's, which must be known: dim > 0); for real[], text or JSON
// results the live column's own type (a text result in a varchar(n) column
// gets text). The result is what AddShadowColumn accepts.
func ShadowType(live *Target, dim int) (string, error) {
	var typ string
	switch {
	case live.Vector:
		if dim <= 0 {
			return "", fmt.Errorf("shadow column of %s.%s: the new model's dimension is unknown", live.Table, pgx.Identifier{live.Column}.Sanitize())
		}
		base, _, _ := strings.Cut(live.SQLType, "(")
		typ = fmt.Sprintf("%s(%d)", base, dim)
	case live.Type == TextResult:
		typ = "text"
	default: // real[], jsonb, json, or text for a JSON result
		typ = live.SQLType
	}
	if _, err := parseShadowType(typ); err != nil {
		return "", err
	}
	return typ, nil
}

// AddShadowColumn adds column shadow of type sqlType (see parseShadowType)
// to table, unless it exists; an existing column of another type is an
// error (drop it, e.g. with DropShadow, to start again). Adding a nullable
// column without a default changes only the catalog, but it takes the
// table's ACCESS EXCLUSIVE lock for that moment: it waits for the
// transactions using the table, and new ones wait behind it, unless the
// session's lock_timeout ends the wait first.
func AddShadowColumn(ctx context.Context, conn *pgx.Conn, table *catalog.Table, shadow, sqlType string) error {
	typ, err := parseShadowType(sqlType)
	if err != nil {
		return err
	}
	col := pgx.Identifier{shadow}.Sanitize()
	add := fmt.Sprintf("ALTER TABLE %s ADD COLUMN IF NOT EXISTS %s %s", table.Identifier().Sanitize(), col, typ.sql)
	if _, err := conn.Exec(ctx, add); err != nil {
		return fmt.Errorf("add shadow column %s to %s: %w", col, table, err)
	}
	var same bool
	var has string
	err = conn.QueryRow(ctx, `SELECT a.atttypid = to_regtype($3) AND a.atttypmod = $4, format_type(a.atttypid, a.atttypmod)
FROM pg_attribute a WHERE a.attrelid = $1 AND a.attname = $2 AND NOT a.attisdropped`,
		table.OID, shadow, typ.base, typ.mod).Scan(&same, &has)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("add shadow column %s to %s: it is not there after ALTER TABLE (was the table replaced?)", col, table)
	}
	if err != nil {
		return fmt.Errorf("shadow column %s of %s: %w", col, table, err)
	}
	if !same {
		return fmt.Errorf("shadow column %s of %s exists as %s, not %s: drop it to start the switch again", col, table, has, typ.sql)
	}
	return nil
}

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
	name, display, kind    string
	valid, unique, nullsND bool
	natts, nkeyatts        int16
	key0                   int16
	exprs, pred, predSQL   string
	inKey, depends         bool // the live column is a key or INCLUDE column; the index depends on it
	method                 string
	opcSchema, opcName     string
	opcFits                bool
	collSchema, collName   string
	option0                int16
	reloptions, attoptions []string
	tablespace             string
	constraint             string
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

// LockStartSetting is the transaction-local setting in which Switch records
// when it asked for the table's lock, and LockMillisSQL reads it.
const LockStartSetting = "pgimageai.switch_lock_start"

// LockMillisSQL is an SQL expression, for a statement of the switch
// transaction queued after Switch (the insert of its switch_history row):
// the milliseconds since Switch asked for the table's ACCESS EXCLUSIVE lock
// (its wait included). The lock is held until the transaction ends, so this
// measures up to that statement, not to the commit that follows it; NULL
// outside a transaction that ran Switch.
const LockMillisSQL = `((extract(epoch FROM clock_timestamp()) - NULLIF(current_setting('` + LockStartSetting + `', true), '')::numeric) * 1000)::float8`

// queueLockTimeout queues SET LOCAL lock_timeout = d (none when d <= 0): a
// statement of the transaction that waits longer for a lock fails with
// SQLSTATE 55P03, and the transaction with it.
func queueLockTimeout(b *pgx.Batch, d time.Duration) {
	if d <= 0 {
		return
	}
	ms := (d + time.Millisecond - 1) / time.Millisecond
	b.Queue("SELECT set_config('lock_timeout', $1, true)", fmt.Sprintf("%dms", ms))
}

// Switch is the switch of a rule's live column to its shadow column, for the
// lane of the target table to queue in its own target transaction, before
// the bookkeeping of the switch (whose switch_history row may take lock_ms
// from LockMillisSQL):
//
//	SET LOCAL lock_timeout = LockTimeout (when > 0)
//	ALTER TABLE t DROP COLUMN live              -- drops the live column's indexes
//	ALTER TABLE t RENAME COLUMN shadow TO live
//	ALTER INDEX shadow_idx RENAME TO original   -- for each of Indexes
//
// The DROP COLUMN takes the table's ACCESS EXCLUSIVE lock until the
// transaction ends: readers and writers of the table wait for the commit
// (DDL on the catalog only: milliseconds), and while it waits for the
// transactions using the table, new ones wait behind it, which LockTimeout
// bounds. It relies on ShadowIndexes, BuildShadowIndexes and
// SwitchObstacles having found nothing in the way; if anything is (a view
// created since, a shadow index gone), a statement fails and the whole
// transaction with it, leaving the table as it was. The dropped column's
// values stay in the table's pages until rows are rewritten (PostgreSQL's
// DROP COLUMN), and statements prepared on the table are planned again.
type Switch struct {
	Table        pgx.Identifier
	Live, Shadow string
	Indexes      []IndexPlan
	LockTimeout  time.Duration
}

// Queue implements Op.
func (s Switch) Queue(b *pgx.Batch) {
	queueLockTimeout(b, s.LockTimeout)
	b.Queue("SELECT set_config('" + LockStartSetting + "', extract(epoch FROM clock_timestamp())::text, true)")
	table := s.Table.Sanitize()
	b.Queue(fmt.Sprintf("ALTER TABLE %s DROP COLUMN %s", table, pgx.Identifier{s.Live}.Sanitize()))
	b.Queue(fmt.Sprintf("ALTER TABLE %s RENAME COLUMN %s TO %s", table, pgx.Identifier{s.Shadow}.Sanitize(), pgx.Identifier{s.Live}.Sanitize()))
	for _, p := range s.Indexes {
		b.Queue(fmt.Sprintf("ALTER INDEX %s RENAME TO %s", pgx.Identifier{p.Schema, p.Name}.Sanitize(), pgx.Identifier{p.Original}.Sanitize()))
	}
}

// DropShadow drops a shadow column and, with it, its indexes (built or
// left invalid by an interrupted build): an aborted or cancelled switch. It
// takes the table's ACCESS EXCLUSIVE lock like Switch, bounded by
// LockTimeout when > 0. A column already gone is no error.
type DropShadow struct {
	Table       pgx.Identifier
	Shadow      string
	LockTimeout time.Duration
}

// Queue implements Op.
func (d DropShadow) Queue(b *pgx.Batch) {
	queueLockTimeout(b, d.LockTimeout)
	b.Queue(fmt.Sprintf("ALTER TABLE %s DROP COLUMN IF EXISTS %s", d.Table.Sanitize(), pgx.Identifier{d.Shadow}.Sanitize()))
}
