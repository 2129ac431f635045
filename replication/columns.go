package replication

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// PublishTable is a table a publication publishes and the columns it
// publishes of it (PostgreSQL 15+ column lists): what the rules read. The
// publication adds the columns of the table's replica identity — PostgreSQL
// refuses the application's UPDATE and DELETE on a table published with a
// column list that lacks them (SQLSTATE 42P10) — and publishes every column
// of a table whose identity (or one of whose partitions' identity) is FULL,
// whose identity is every column. Columns nil publishes every column; so
// does PostgreSQL 14, which has no column lists.
type PublishTable struct {
	Name    pgx.Identifier
	Columns []string
}

// columnListSQL returns, for each table of $1 with the column names of $2
// (a JSON array of arrays, one per table), the attribute numbers and names
// of those columns and of the replica identity columns of the table and of
// every partition under it, in attribute order; NULLs when the table or one
// of its partitions is REPLICA IDENTITY FULL. A name the table lacks is
// left out: the rule that named it is invalid at its next load.
const columnListSQL = `
SELECT t.i, l.attnums, l.attnames
FROM ROWS FROM (pg_catalog.unnest($1::oid[]), pg_catalog.jsonb_array_elements($2::jsonb)) WITH ORDINALITY AS t(oid, cols, i)
LEFT JOIN LATERAL (
  SELECT pg_catalog.array_agg(a.attnum ORDER BY a.attnum) AS attnums, pg_catalog.array_agg(a.attname ORDER BY a.attnum) AS attnames
  FROM pg_catalog.pg_attribute a
  WHERE a.attrelid = t.oid AND a.attnum > 0 AND NOT a.attisdropped
    AND (a.attname IN (SELECT pg_catalog.jsonb_array_elements_text(t.cols))
      OR a.attname IN (
         SELECT la.attname
           FROM pg_catalog.pg_class r
           JOIN pg_catalog.pg_index x ON x.indrelid = r.oid
            AND CASE r.relreplident WHEN 'd' THEN x.indisprimary WHEN 'i' THEN x.indisreplident ELSE false END
           JOIN pg_catalog.pg_attribute la ON la.attrelid = r.oid AND la.attnum = ANY (x.indkey)
          WHERE r.oid = t.oid OR r.oid IN (SELECT relid FROM pg_catalog.pg_partition_tree(t.oid))))
) AS l ON NOT EXISTS (
  SELECT FROM pg_catalog.pg_class f
   WHERE f.relreplident = 'f' AND (f.oid = t.oid OR f.oid IN (SELECT relid FROM pg_catalog.pg_partition_tree(t.oid))))
ORDER BY t.i`

// columnLists sets the column list of each table of want whose columns
// are given (cols, by index), on PostgreSQL 15 and later.
func columnLists(ctx context.Context, tx pgx.Tx, want []publishedTable, cols [][]string) error {
	var version int
	if err := tx.QueryRow(ctx, "SELECT pg_catalog.current_setting('server_version_num')::int").Scan(&version); err != nil {
		return err
	}
	if version < 150000 {
		return nil
	}
	var oids []uint32
	var lists [][]string
	var at []int
	for i, c := range cols {
		if c != nil {
			oids, lists, at = append(oids, want[i].OID), append(lists, c), append(at, i)
		}
	}
	if len(oids) == 0 {
		return nil
	}
	js, err := json.Marshal(lists)
	if err != nil {
		return err
	}
	rows, err := tx.Query(ctx, columnListSQL, oids, string(js))
	if err != nil {
		return fmt.Errorf("column lists: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var i int
		var attrs []int16
		var names []string
		if err := rows.Scan(&i, &attrs, &names); err != nil {
			return fmt.Errorf("column lists: %w", err)
		}
		want[at[i-1]].Attrs, want[at[i-1]].Columns = attrs, names
	}
	return rows.Err()
}

// attrsOf parses pg_publication_rel.prattrs as to_jsonb writes it (a JSON
// array of attribute numbers, or null), sorted.
func attrsOf(m json.RawMessage) ([]int16, error) {
	if !isJSONValue(m) {
		return nil, nil
	}
	var attrs []int16
	if err := json.Unmarshal(m, &attrs); err != nil {
		return nil, fmt.Errorf("parse prattrs %s: %w", m, err)
	}
	slices.Sort(attrs)
	return attrs, nil
}

// columnList writes t's column list for FOR TABLE and SET TABLE, "" when
// it publishes every column.
func (t publishedTable) columnList() string {
	if len(t.Columns) == 0 {
		return ""
	}
	parts := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		parts[i] = pgx.Identifier{c}.Sanitize()
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
