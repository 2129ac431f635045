// Package catalog reads table definitions from PostgreSQL's system catalogs:
// what a rule names (source tables, their primary keys, the image column) and
// what a target table already has. Names are resolved the way PostgreSQL
// resolves a regclass, so 'photos', 'public.photos' and '"Odd Schema"."My
// Table"' all work, and identifiers are never pasted into SQL. A name
// without a schema is a table of schema public (Qualify): the bridge's
// sessions search pg_catalog only (internal/pgconnect).
//
// Layer: postgres.
package catalog

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgimageai/pgimageai/internal/pgerr"
)

// Querier is what catalog needs of a connection: *pgx.Conn, pgxpool.Pool and
// pgx.Tx all qualify.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ErrNoTable is returned when a name does not resolve to a table.
var ErrNoTable = errors.New("no such table")

// Column is one column of a table.
type Column struct {
	Name    string
	TypeOID uint32
	Type    string // format_type(): "bytea", "integer", "character varying(20)", "vector(3)"
	TypeMod int32
	// BaseType is the type without its modifier, as format_type() prints
	// it given the modifier -1: "character varying" for "character
	// varying(20)", "bpchar" for "character(8)" (plain "character" would
	// mean character(1)). A cast to it never truncates or rounds.
	BaseType string
	// Underlying is the OID of the type under any domains (pg_type.typbasetype
	// followed to the end); TypeOID when the column's type is no domain.
	Underlying uint32
}

// Table is a table's definition.
type Table struct {
	OID        uint32
	Schema     string
	Name       string
	Regclass   string // schema.name quoted only where needed: public.photos, "Odd Schema"."My Table"
	Columns    []Column
	PrimaryKey []string // primary key column names in key order; empty when none
	// Identity is the replica identity and the key it carries (Key): what
	// a source table's rows are identified by (identity.go).
	Identity Identity
}

// Identifier returns the table's quoted, schema-qualified name.
func (t *Table) Identifier() pgx.Identifier { return pgx.Identifier{t.Schema, t.Name} }

// String returns the table's name as PostgreSQL prints a regclass with an
// explicit schema, e.g. public.photos or "Odd Schema"."My Table". Use
// Identifier, not String, to build SQL.
func (t *Table) String() string { return t.Regclass }

// Column returns the named column (exact case), or false.
func (t *Table) Column(name string) (Column, bool) {
	for _, c := range t.Columns {
		if c.Name == name {
			return c, true
		}
	}
	return Column{}, false
}

// DefaultSchema is the schema of a table named in a rule without one.
const DefaultSchema = "public"

// Qualify returns name with DefaultSchema in front when it names no schema
// ("photos" → "public.photos", `"My Table"` → `public."My Table"`), and
// name as it is otherwise. Only a dot outside double quotes separates a
// schema: `"a.b"` is one table of public.
func Qualify(name string) string {
	quoted := false
	for _, r := range name {
		switch {
		case r == '"':
			quoted = !quoted // "" inside quotes toggles twice
		case r == '.' && !quoted:
			return name
		}
	}
	return DefaultSchema + "." + name
}

// QualifySQL is Qualify in SQL, for a rule's table name held in column
// expr: to_regclass(QualifySQL("source_table")) resolves it as Lookup does.
func QualifySQL(expr string) string {
	return fmt.Sprintf("CASE WHEN pg_catalog.cardinality(pg_catalog.parse_ident(%[1]s)) = 1 THEN '%[2]s.' || %[1]s ELSE %[1]s END", expr, DefaultSchema)
}

// Lookup resolves name (Qualify) as a regclass and reads the table's columns, primary
// key and replica identity. A name that does not resolve, or resolves to something that is
// not an ordinary or partitioned table, gives an error wrapping ErrNoTable.
func Lookup(ctx context.Context, q Querier, name string) (*Table, error) {
	var t Table
	var kind string
	err := q.QueryRow(ctx, `
SELECT c.oid, n.nspname, c.relname, pg_catalog.format('%I.%I', n.nspname, c.relname), c.relkind::text
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = pg_catalog.to_regclass($1)`, Qualify(name)).Scan(&t.OID, &t.Schema, &t.Name, &t.Regclass, &kind)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("table %s: %w", name, ErrNoTable)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgerr.InvalidName {
		return nil, fmt.Errorf("table %s: %w (%s)", name, ErrNoTable, pgErr.Message)
	}
	if err != nil {
		return nil, fmt.Errorf("look up table %s: %w", name, err)
	}
	if kind != "r" && kind != "p" {
		return nil, fmt.Errorf("%s is not a table (relkind %s): %w", name, kind, ErrNoTable)
	}
	rows, err := q.Query(ctx, `
SELECT a.attname, a.atttypid, format_type(a.atttypid, a.atttypmod), a.atttypmod, format_type(a.atttypid, -1)
FROM pg_attribute a
WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`, t.OID)
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", name, err)
	}
	t.Columns, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Column, error) {
		var c Column
		err := r.Scan(&c.Name, &c.TypeOID, &c.Type, &c.TypeMod, &c.BaseType)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", name, err)
	}
	rows, err = q.Query(ctx, `
SELECT a.attname
FROM pg_index i
CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
WHERE i.indrelid = $1 AND i.indisprimary
ORDER BY k.ord`, t.OID)
	if err != nil {
		return nil, fmt.Errorf("primary key of %s: %w", name, err)
	}
	t.PrimaryKey, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("primary key of %s: %w", name, err)
	}
	if err := identity(ctx, q, &t); err != nil {
		return nil, err
	}
	if err := domains(ctx, q, &t); err != nil {
		return nil, err
	}
	return &t, nil
}
