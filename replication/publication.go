package replication

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/internal/pgerr"
)

// publishOptions are the options every pgimageai publication has: all four
// operations, and partitioned tables published as their root, so that a rule
// on a partitioned table sees the changes of its partitions under its own name.
const publishOptions = "publish = 'insert, update, delete, truncate', publish_via_partition_root = true"

// publishedTable is a table resolved to its OID and canonical name.
type publishedTable struct {
	OID   uint32
	Ident pgx.Identifier // schema and table, as stored in the catalogs
	// Attrs and Columns are the column list's attribute numbers, sorted,
	// and names in the same order; nil publishes every column.
	Attrs   []int16
	Columns []string
}

// publicationState is what the catalogs say about an existing publication.
type publicationState struct {
	OID        uint32
	AllTables  bool
	OptionsOK  bool             // all four operations and publish_via_partition_root
	Tables     []publishedTable // explicitly listed tables
	Filtered   bool             // some table has a row filter (PostgreSQL 15+)
	HasSchemas bool             // FOR TABLES IN SCHEMA entries (PostgreSQL 15+)
}

// SyncPublication makes the publication name publish exactly tables, every
// column of each (see SyncPublicationTables).
func SyncPublication(ctx context.Context, conn *pgx.Conn, name string, tables []pgx.Identifier) error {
	ts := make([]PublishTable, len(tables))
	for i, t := range tables {
		ts[i] = PublishTable{Name: t}
	}
	return SyncPublicationTables(ctx, conn, name, ts)
}

// SyncPublicationTables makes the publication name publish exactly tables (each
// "schema"."table", or "table" resolved through search_path): it creates the
// publication FOR TABLE those tables, or, when the existing table set
// differs, runs ALTER PUBLICATION ... SET TABLE. It also resets publish
// options, row filters and column lists that someone else set (a table's
// column list is the one PublishTable says, on PostgreSQL 15+): pgimageai
// owns its publication: a FOR ALL TABLES publication of that name is dropped
// and created anew in the same transaction. Identifiers are always quoted
// with pgx.Identifier.Sanitize, never pasted.
//
// SyncPublication runs in one transaction under a transaction-level advisory
// lock, so concurrent calls for the same name serialize. conn must not be
// used concurrently.
func SyncPublicationTables(ctx context.Context, conn *pgx.Conn, name string, tables []PublishTable) error {
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('pgimageai.publication'), hashtext($1))", name); err != nil {
			return err
		}
		want, err := resolveTables(ctx, tx, tables)
		if err != nil {
			return err
		}
		state, found, err := readPublication(ctx, tx, name)
		if err != nil {
			return err
		}
		for _, stmt := range publicationDDL(name, want, state, found) {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		return nil
	}
	if pgerr.SQLState(err) == pgerr.InsufficientPrivilege {
		return fmt.Errorf("%w: publication %s: CREATE PUBLICATION needs the CREATE privilege on the database and adding a table needs its ownership (or a superuser): %v",
			ErrPrivilege, pgx.Identifier{name}.Sanitize(), err)
	}
	return fmt.Errorf("sync publication %s: %w", pgx.Identifier{name}.Sanitize(), err)
}

// resolveTables maps identifiers to OIDs and canonical names, dropping
// duplicates, and reads their column lists; a missing table is an error.
func resolveTables(ctx context.Context, tx pgx.Tx, tables []PublishTable) ([]publishedTable, error) {
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = t.Name.Sanitize()
	}
	rows, err := tx.Query(ctx, `
		SELECT t.name, c.oid, n.nspname, c.relname
		FROM unnest($1::text[]) WITH ORDINALITY AS t(name, i)
		LEFT JOIN pg_class c ON c.oid = to_regclass(t.name)
		LEFT JOIN pg_namespace n ON n.oid = c.relnamespace
		ORDER BY t.i`, names)
	if err != nil {
		return nil, err
	}
	var out []publishedTable
	var cols [][]string
	var missing []string
	for i := 0; rows.Next(); i++ {
		var name string
		var oid *uint32
		var schema, rel *string
		if err := rows.Scan(&name, &oid, &schema, &rel); err != nil {
			return nil, err
		}
		if oid == nil {
			missing = append(missing, name)
			continue
		}
		if !slices.ContainsFunc(out, func(p publishedTable) bool { return p.OID == *oid }) {
			out = append(out, publishedTable{OID: *oid, Ident: pgx.Identifier{*schema, *rel}})
			cols = append(cols, tables[i].Columns)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("table %s does not exist", strings.Join(missing, ", "))
	}
	if err := columnLists(ctx, tx, out, cols); err != nil {
		return nil, err
	}
	return out, nil
}

// readPublication reads the publication name; found is false when it does not exist.
func readPublication(ctx context.Context, tx pgx.Tx, name string) (st publicationState, found bool, err error) {
	var version int
	err = tx.QueryRow(ctx, `
		SELECT p.oid, p.puballtables,
		       p.pubinsert AND p.pubupdate AND p.pubdelete AND p.pubtruncate AND p.pubviaroot,
		       current_setting('server_version_num')::int
		FROM pg_publication p WHERE p.pubname = $1`, name).Scan(&st.OID, &st.AllTables, &st.OptionsOK, &version)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, false, nil
	}
	if err != nil {
		return st, false, err
	}
	// to_jsonb spares a query per version: prqual and prattrs exist from 15 on.
	rows, err := tx.Query(ctx, `
		SELECT pr.prrelid, to_jsonb(pr)::text, n.nspname, c.relname
		FROM pg_publication_rel pr
		JOIN pg_class c ON c.oid = pr.prrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE pr.prpubid = $1`, st.OID)
	if err != nil {
		return st, false, err
	}
	for rows.Next() {
		var relID uint32
		var js []byte
		var schema, rel string
		if err := rows.Scan(&relID, &js, &schema, &rel); err != nil {
			return st, false, err
		}
		var pr struct {
			Qual  json.RawMessage `json:"prqual"`
			Attrs json.RawMessage `json:"prattrs"`
		}
		if err := json.Unmarshal(js, &pr); err != nil {
			return st, false, fmt.Errorf("parse pg_publication_rel row: %w", err)
		}
		if isJSONValue(pr.Qual) {
			st.Filtered = true
		}
		attrs, err := attrsOf(pr.Attrs)
		if err != nil {
			return st, false, err
		}
		st.Tables = append(st.Tables, publishedTable{OID: relID, Ident: pgx.Identifier{schema, rel}, Attrs: attrs})
	}
	if err := rows.Err(); err != nil {
		return st, false, err
	}
	if version >= 150000 {
		err = tx.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_publication_namespace WHERE pnpubid = $1)", st.OID).Scan(&st.HasSchemas)
		if err != nil {
			return st, false, err
		}
	}
	return st, true, nil
}

func isJSONValue(m json.RawMessage) bool { return len(m) > 0 && string(m) != "null" }

// publicationDDL returns the statements that turn the publication (state,
// when found) into one that publishes exactly want; none when it already does.
func publicationDDL(name string, want []publishedTable, state publicationState, found bool) []string {
	pub := pgx.Identifier{name}.Sanitize()
	if !found {
		if len(want) == 0 {
			return []string{"CREATE PUBLICATION " + pub + " WITH (" + publishOptions + ")"}
		}
		return []string{"CREATE PUBLICATION " + pub + " FOR TABLE " + tableList(want) + " WITH (" + publishOptions + ")"}
	}
	if state.AllTables {
		// ALTER PUBLICATION cannot turn FOR ALL TABLES into a table list.
		return []string{"DROP PUBLICATION " + pub, publicationDDL(name, want, publicationState{}, false)[0]}
	}
	var stmts []string
	if !state.OptionsOK {
		stmts = append(stmts, "ALTER PUBLICATION "+pub+" SET ("+publishOptions+")")
	}
	if state.Filtered || state.HasSchemas || !sameTables(want, state.Tables) {
		if len(want) > 0 {
			stmts = append(stmts, "ALTER PUBLICATION "+pub+" SET TABLE "+tableList(want))
		} else {
			if state.HasSchemas {
				// SET needs at least one object; recreate to drop schema entries.
				return []string{"DROP PUBLICATION " + pub, publicationDDL(name, nil, publicationState{}, false)[0]}
			}
			if len(state.Tables) > 0 {
				stmts = append(stmts, "ALTER PUBLICATION "+pub+" DROP TABLE "+tableList(state.Tables))
			}
		}
	}
	return stmts
}

func tableList(ts []publishedTable) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = t.Ident.Sanitize() + t.columnList()
	}
	return strings.Join(parts, ", ")
}

func sameTables(a, b []publishedTable) bool {
	if len(a) != len(b) {
		return false
	}
	for _, t := range a {
		if !slices.ContainsFunc(b, func(u publishedTable) bool { return u.OID == t.OID && slices.Equal(u.Attrs, t.Attrs) }) {
			return false
		}
	}
	return true
}

// PublishedTables returns the OIDs of the tables that publication name
// publishes — listed, in a published schema, or all of them — as
// pg_publication_tables shows them; found is false when there is no such
// publication. It lets a caller without the privilege to change a
// publication see whether it already covers what it needs.
func PublishedTables(ctx context.Context, conn *pgx.Conn, name string) (oids map[uint32]bool, found bool, err error) {
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_publication WHERE pubname = $1)", name).Scan(&found); err != nil || !found {
		return nil, false, err
	}
	rows, _ := conn.Query(ctx, `SELECT c.oid FROM pg_publication_tables pt
JOIN pg_namespace n ON n.nspname = pt.schemaname
JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = pt.tablename
WHERE pt.pubname = $1`, name)
	list, err := pgx.CollectRows(rows, pgx.RowTo[uint32])
	if err != nil {
		return nil, true, fmt.Errorf("read tables of publication %s: %w", pgx.Identifier{name}.Sanitize(), err)
	}
	oids = make(map[uint32]bool, len(list))
	for _, oid := range list {
		oids[oid] = true
	}
	return oids, true, nil
}

// DropPublication drops publication name; dropped is false when there was no
// such publication. conn must not be used concurrently.
func DropPublication(ctx context.Context, conn *pgx.Conn, name string) (dropped bool, err error) {
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_catalog.pg_publication WHERE pubname = $1)", name).Scan(&exists); err != nil {
		return false, fmt.Errorf("read publication %s: %w", pgx.Identifier{name}.Sanitize(), err)
	}
	if !exists {
		return false, nil
	}
	if _, err := conn.Exec(ctx, "DROP PUBLICATION IF EXISTS "+pgx.Identifier{name}.Sanitize()); err != nil {
		if pgerr.SQLState(err) == pgerr.InsufficientPrivilege {
			return false, fmt.Errorf("%w: drop publication %s: only its owner (or a superuser) may: %v", ErrPrivilege, pgx.Identifier{name}.Sanitize(), err)
		}
		return false, fmt.Errorf("drop publication %s: %w", pgx.Identifier{name}.Sanitize(), err)
	}
	return true, nil
}
