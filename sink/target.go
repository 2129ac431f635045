package sink

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/internal/pgerr"
	"github.com/pgimageai/pgimageai/state"
)

// ResultType is the SQL type of a result column.
type ResultType uint8

// The result types.
const (
	TextResult   ResultType = iota + 1 // AI_IMAGE_COMPLETE → text
	VectorResult                       // AI_IMAGE_EMBED → real[] or pgvector vector(n)
	JSONResult                         // AI_IMAGE_COMPLETE with structured output → jsonb
)

// Target is one result column of a target table, keyed by the source table's
// key (its replica identity's columns, catalog.Table.Key). It is immutable and safe for concurrent use.
type Target struct {
	Table  *catalog.Table // the target table as it is after Ensure
	Key    []string       // the source's key column names, in its key order
	Column string         // the result column
	Type   ResultType
	// SQLType is the result column's type as format_type() prints it, e.g.
	// "text", "real[]" or "vector(3)".
	SQLType string
	// Dim is the dimension a pgvector vector(n) column demands; 0 = any.
	Dim int
	// Vector is true for a pgvector column: values are sent as text and cast.
	Vector bool
	// WriteBack is true when the target is the source table itself: results
	// only ever UPDATE existing rows, and deletes, key moves and truncates
	// are the source's own.
	WriteBack bool
	// TrustCode is true for a write-back table whose triggers, rules and
	// functions the operator trusts (pgimageai run --trust-tables):
	// its writes skip catalog.UserCodeGuard.
	TrustCode bool

	// Altered is the ALTER TABLE statement that Ensure ran to widen the key
	// columns after the source's (see widenKey); "" when it ran none.
	Altered string

	cast bool // the value is sent as text and cast to SQLType (pgvector, json)

	targetSQL
}

// targetSQL is the statements that prepare computes once for a Target.
type targetSQL struct {
	upsert, del, move, delStale, has string
	upsertMany                       string // "" for write-back: see Upserts
}

// HasValue reports whether the target row keyed key holds a result (not
// NULL): a stored result whose input is unchanged counts only while it is
// still there (a target row deleted or truncated by hand is computed again).
func (t *Target) HasValue(ctx context.Context, conn *pgx.Conn, key []any) (bool, error) {
	var has bool
	if err := conn.QueryRow(ctx, t.has, key...).Scan(&has); err != nil {
		return false, fmt.Errorf("read %s: %w", t.Name(), err)
	}
	return has, nil
}

// Name returns the target table's quoted name.
func (t *Target) Name() string { return t.Table.String() }

// Ensure makes sure target table name exists with the source's key
// columns (same names and types) and the result column, creating what is
// missing, and validates what exists. source is the rule's source table.
// A table it creates is recorded as the bridge's (state.RecordCreatedTarget);
// the key columns of such a table follow a widening of the source's key
// (see widenKey), and Target.Altered says so.
//
// sameServer says that conn reaches the source's database, so that a target
// with the source's OID is the source table itself (write-back).
func Ensure(ctx context.Context, conn *pgx.Conn, name string, source *catalog.Table, column string, typ ResultType, sameServer bool) (*Target, error) {
	if len(source.Key()) == 0 {
		return nil, fmt.Errorf("source table %s has no key (its replica identity carries none)", source)
	}
	keyCols := make([]catalog.Column, len(source.Key()))
	for i, k := range source.Key() {
		keyCols[i], _ = source.Column(k)
	}
	table, err := catalog.Lookup(ctx, conn, name)
	if errors.Is(err, catalog.ErrNoTable) {
		if err := create(ctx, conn, name, keyCols); err != nil {
			return nil, err
		}
		table, err = catalog.Lookup(ctx, conn, name)
	}
	if err != nil {
		return nil, fmt.Errorf("target table %s: %w", name, err)
	}
	altered, err := widenKey(ctx, conn, table, keyCols)
	if err != nil {
		return nil, err
	}
	if altered != "" {
		if table, err = catalog.Lookup(ctx, conn, name); err != nil {
			return nil, fmt.Errorf("target table %s: %w", name, err)
		}
	}
	// A write-back target is the source itself: its rows are found by the
	// source's key (a USING INDEX identity is unique without being a
	// primary key), and it is never upserted, so no constraint is needed.
	if writeBack := table.OID == source.OID && sameServer; !writeBack {
		if err := checkKey(table, keyCols); err != nil {
			return nil, err
		}
	}
	col, ok := table.Column(column)
	if !ok {
		sqlType := map[ResultType]string{TextResult: "text", VectorResult: "real[]", JSONResult: "jsonb"}[typ]
		add := fmt.Sprintf("ALTER TABLE %s ADD COLUMN IF NOT EXISTS %s %s", table.Identifier().Sanitize(), pgx.Identifier{column}.Sanitize(), sqlType)
		if _, err := conn.Exec(ctx, add); err != nil {
			return nil, fmt.Errorf("add result column %s to %s: %w", column, table, err)
		}
		if table, err = catalog.Lookup(ctx, conn, name); err != nil {
			return nil, fmt.Errorf("target table %s: %w", name, err)
		}
		col, _ = table.Column(column)
	}
	t := &Target{Table: table, Key: source.Key(), Column: column, Type: typ, SQLType: col.Type, WriteBack: table.OID == source.OID && sameServer, Altered: altered}
	if err := t.checkColumn(col); err != nil {
		return nil, err
	}
	if err := t.checkPrivileges(ctx, conn); err != nil {
		return nil, err
	}
	t.prepareSQL()
	return t, nil
}

// NewTarget returns the target of a result column of table as described,
// with its statements, without a database: Ensure is what creates and
// checks a target; tests describe one.
func NewTarget(table *catalog.Table, key []string, column string, typ ResultType, sqlType string, writeBack bool) (*Target, error) {
	t := &Target{Table: table, Key: key, Column: column, Type: typ, SQLType: sqlType, WriteBack: writeBack}
	if err := t.checkColumn(catalog.Column{Name: column, Type: sqlType}); err != nil {
		return nil, err
	}
	t.prepareSQL()
	return t, nil
}

// create creates the target table with the key columns as its primary key,
// and records it as the bridge's in the same transaction. A table that
// someone else created meanwhile is left to Ensure's checks, unrecorded.
func create(ctx context.Context, conn *pgx.Conn, name string, key []catalog.Column) error {
	var parts []string
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.parse_ident($1)", name).Scan(&parts); err != nil {
		return fmt.Errorf("target table name %q: %w", name, err)
	}
	var id pgx.Identifier
	switch len(parts) {
	case 1: // as catalog.Lookup resolves it
		id = pgx.Identifier{catalog.DefaultSchema, parts[0]}
	case 2:
		id = pgx.Identifier{parts[0], parts[1]}
	default:
		return fmt.Errorf("target table name %q: want table or schema.table", name)
	}
	var cols, pk []string
	for _, c := range key {
		cols = append(cols, pgx.Identifier{c.Name}.Sanitize()+" "+c.Type+" NOT NULL")
		pk = append(pk, pgx.Identifier{c.Name}.Sanitize())
	}
	// Not IF NOT EXISTS: only a table this transaction made is recorded.
	ddl := fmt.Sprintf("CREATE TABLE %s (%s, PRIMARY KEY (%s))", id.Sanitize(), strings.Join(cols, ", "), strings.Join(pk, ", "))
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, ddl); err != nil {
			return err
		}
		var oid uint32
		if err := tx.QueryRow(ctx, "SELECT $1::regclass::oid", id.Sanitize()).Scan(&oid); err != nil {
			return err
		}
		return state.RecordCreatedTarget(ctx, tx, oid)
	})
	switch pgerr.SQLState(err) {
	case "":
		if err != nil {
			return fmt.Errorf("create target table %s: %w", id.Sanitize(), err)
		}
		return nil
	case pgerr.DuplicateTable, pgerr.UniqueViolation: // created concurrently
		return nil
	}
	return fmt.Errorf("create target table %s: %w", id.Sanitize(), err)
}

// checkKey verifies that the target has the source's key columns, with the
// same types, as its primary key (ON CONFLICT needs that constraint).
func checkKey(table *catalog.Table, key []catalog.Column) error {
	if len(table.PrimaryKey) > 0 && !sameSet(table.PrimaryKey, key) {
		// First: a source whose key changed (another replica identity)
		// leaves a target keyed by the old one, which may lack the new
		// key's columns; one message says what to do.
		names := make([]string, len(key))
		for i, k := range key {
			names[i] = catalog.QuoteIdent(k.Name)
		}
		return fmt.Errorf("target table %s: its primary key (%s) must be the source's key columns (%s), which its replica identity names; make them its primary key, or drop the table and the bridge creates it again and backfills it",
			table, strings.Join(table.PrimaryKey, ", "), strings.Join(names, ", "))
	}
	for _, k := range key {
		c, ok := table.Column(k.Name)
		if !ok {
			return fmt.Errorf("target table %s lacks key column %q of the source's key (its replica identity)", table, k.Name)
		}
		if c.Type != k.Type {
			return fmt.Errorf("target table %s: key column %q is %s, the source's is %s", table, k.Name, c.Type, k.Type)
		}
	}
	if !sameSet(table.PrimaryKey, key) {
		return fmt.Errorf("target table %s: its primary key (%s) must be the source's key columns", table, strings.Join(table.PrimaryKey, ", "))
	}
	return nil
}

func sameSet(names []string, cols []catalog.Column) bool {
	if len(names) != len(cols) {
		return false
	}
	seen := map[string]bool{}
	for _, n := range names {
		seen[n] = true
	}
	for _, c := range cols {
		if !seen[c.Name] {
			return false
		}
	}
	return true
}

// checkColumn validates the result column's type against the function.
func (t *Target) checkColumn(c catalog.Column) error {
	switch t.Type {
	case TextResult:
		if c.Type == "text" || strings.HasPrefix(c.Type, "character varying") {
			return nil
		}
		return fmt.Errorf("target column %s.%s is %s; AI_IMAGE_COMPLETE writes text", t.Table, pgx.Identifier{c.Name}.Sanitize(), c.Type)
	case JSONResult:
		switch c.Type {
		case "jsonb", "json":
			t.cast = true
			return nil
		case "text":
			return nil
		}
		return fmt.Errorf("target column %s.%s is %s; AI_IMAGE_COMPLETE with response_format writes jsonb", t.Table, pgx.Identifier{c.Name}.Sanitize(), c.Type)
	case VectorResult:
		if c.Type == "real[]" {
			return nil
		}
		if dim, ok := vectorType(c); ok {
			t.Vector, t.Dim, t.cast = true, dim, true
			return nil
		}
		return fmt.Errorf("target column %s.%s is %s; AI_IMAGE_EMBED writes real[] or pgvector vector(n)", t.Table, pgx.Identifier{c.Name}.Sanitize(), c.Type)
	}
	return fmt.Errorf("unknown result type %d", t.Type)
}

// vectorType recognises pgvector's vector type, possibly schema-qualified,
// with or without a dimension. pgvector stores the dimension as the typmod.
func vectorType(c catalog.Column) (int, bool) {
	base, _, _ := strings.Cut(c.Type, "(")
	if base != "vector" && !strings.HasSuffix(base, ".vector") {
		return 0, false
	}
	return max(int(c.TypeMod), 0), true
}

// prepareSQL builds the statements of this target once.
func (t *Target) prepareSQL() {
	table := t.Table.Identifier().Sanitize()
	col := pgx.Identifier{t.Column}.Sanitize()
	// A key parameter names its type: when a key column is widened (see
	// widenKey), the statements change with it, so that no session uses a
	// statement it prepared for the old type (its parameter types are fixed
	// at PREPARE) to send a key of the new one. A cast to the type without
	// its modifier never truncates: a key too long for varchar(n) fails.
	param := func(n int, k string) string {
		if c, ok := t.Table.Column(k); ok && c.BaseType != "" {
			return fmt.Sprintf("$%d::%s", n, c.BaseType)
		}
		return fmt.Sprintf("$%d", n)
	}
	var keys, params, where, whereOld []string
	for i, k := range t.Key {
		q := pgx.Identifier{k}.Sanitize()
		keys = append(keys, q)
		params = append(params, param(i+1, k))
		where = append(where, fmt.Sprintf("%s = %s", q, param(i+1, k)))
		whereOld = append(whereOld, fmt.Sprintf("%s = %s", q, param(len(t.Key)+i+1, k)))
	}
	n := len(t.Key) + 1
	value := fmt.Sprintf("$%d", n)
	if t.cast {
		value = fmt.Sprintf("$%d::text::%s", n, t.SQLType)
	}
	// Only write when the value differs, so an unchanged result makes no
	// new row version (and, for write-back, no new WAL to read). json has
	// no equality operator: its values are compared as jsonb.
	differs := func(old, new string) string {
		switch {
		case t.SQLType == "json":
			return fmt.Sprintf("(%s)::jsonb IS DISTINCT FROM (%s)::jsonb", old, new)
		case t.Vector:
			// pgvector's = lives in the extension's schema, which the
			// bridge's search_path (pg_catalog, pg_temp) does not search:
			// its text forms are compared, equal exactly when the values are.
			return fmt.Sprintf("(%s)::pg_catalog.text IS DISTINCT FROM (%s)::pg_catalog.text", old, new)
		}
		return fmt.Sprintf("%s IS DISTINCT FROM %s", old, new)
	}
	if t.WriteBack {
		// Never insert: a row deleted meanwhile stays deleted.
		t.upsert = fmt.Sprintf("UPDATE %s AS t SET %s = %s WHERE %s AND %s",
			table, col, value, strings.Join(where, " AND "), differs("t."+col, value))
	} else {
		t.upsert = fmt.Sprintf(`INSERT INTO %s AS t (%s, %s) VALUES (%s, %s)
ON CONFLICT (%s) DO UPDATE SET %s = EXCLUDED.%s WHERE %s`,
			table, strings.Join(keys, ", "), col, strings.Join(params, ", "), value,
			strings.Join(keys, ", "), col, col, differs("t."+col, "EXCLUDED."+col))
	}
	if !t.WriteBack && t.Type != VectorResult {
		// Many rows in one statement: the keys as source_key JSON, each
		// column cast from its text form, the values as text (see Upserts).
		// Not vectors: as text they take three times their binary size, and
		// a lane's write holds its whole batch (the memory bound).
		var fromJSON []string
		for i, k := range t.Key {
			typ := "text"
			if c, ok := t.Table.Column(k); ok {
				typ = c.Type
				if c.BaseType != "" {
					typ = c.BaseType // never truncates: see param
				}
			}
			// The key's JSON field, named by the third parameter (the key
			// column names): no name is ever written into the SQL.
			fromJSON = append(fromJSON, fmt.Sprintf("(v.key ->> ($3::text[])[%d])::%s", i+1, typ))
		}
		val := "v.val"
		if t.Type == JSONResult {
			val = "v.val::" + t.SQLType
		}
		t.upsertMany = fmt.Sprintf(`INSERT INTO %s AS t (%s, %s)
SELECT %s, %s FROM unnest($1::jsonb[], $2::text[]) AS v (key, val)
ON CONFLICT (%s) DO UPDATE SET %s = EXCLUDED.%s WHERE %s`,
			table, strings.Join(keys, ", "), col, strings.Join(fromJSON, ", "), val,
			strings.Join(keys, ", "), col, col, differs("t."+col, "EXCLUDED."+col))
	}
	t.del = fmt.Sprintf("DELETE FROM %s WHERE %s", table, strings.Join(where, " AND "))
	t.has = fmt.Sprintf("SELECT EXISTS (SELECT FROM %s WHERE %s AND %s IS NOT NULL)", table, strings.Join(where, " AND "), col)
	var set []string
	for i, k := range keys {
		set = append(set, fmt.Sprintf("%s = %s", k, param(i+1, t.Key[i])))
	}
	t.move = fmt.Sprintf("UPDATE %s SET %s WHERE %s", table, strings.Join(set, ", "), strings.Join(whereOld, " AND "))
	t.delStale = fmt.Sprintf("DELETE FROM %s WHERE %s AND EXISTS (SELECT FROM %s WHERE %s)", table, strings.Join(where, " AND "), table, strings.Join(whereOld, " AND "))
}

// Renamed returns a copy of t that writes column instead: the target of a
// rule whose shadow column becomes its live column (a version switch), as
// it is once the switch transaction renamed it.
func (t *Target) Renamed(column string) *Target {
	c := *t
	c.Column, c.Altered = column, ""
	c.prepareSQL()
	return &c
}

// TableTarget returns a target of table that holds no rule's column: what
// a lane needs to write a statement on a table no rule writes any more
// (the drop of a given-up shadow column).
func TableTarget(table *catalog.Table) *Target { return &Target{Table: table} }
