package sink

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/catalog"
)

// What a slot recovery (pgimageai recover-slot) does to the target: forget
// the position and the backfills, and delete the results whose source rows
// were deleted while the slot could not stream them.

// orphanPage is how many target keys DeleteOrphans checks per round trip.
const orphanPage = 1000

// DeleteOrphans deletes the rows of target whose key no longer
// exists in source, and returns how many it deleted. target is keyed by
// source's key (its replica identity) (same column names and types, as Ensure checks).
//
// src and tgt may be connections to different databases, or servers: no
// query joins them. Target keys are read in keyset pages of orphanPage, in
// key order; the source is asked which of each page's keys exist; the others
// are deleted. Keys travel as JSON and are turned back into their own types
// by jsonb_populate_recordset, so that PostgreSQL, not Go, compares them.
// Memory stays bounded by a page whatever the table's size.
//
// A row inserted into the source after its key was checked keeps its target
// row or gets a new one from the stream: the caller runs this only once the
// slot that streams such changes exists.
func DeleteOrphans(ctx context.Context, src, tgt *pgx.Conn, source, target *catalog.Table) (int64, error) {
	if len(source.Key()) == 0 {
		return 0, fmt.Errorf("source table %s has no key (its replica identity carries none)", source)
	}
	var keys []string
	for _, k := range source.Key() {
		if _, ok := target.Column(k); !ok {
			return 0, fmt.Errorf("target table %s lacks key column %q of %s", target, k, source)
		}
		keys = append(keys, pgx.Identifier{k}.Sanitize())
	}
	tgtName, srcName := target.Identifier().Sanitize(), source.Identifier().Sanitize()
	list := func(p string) string { return p + strings.Join(keys, ", "+p) }
	pageSQL := fmt.Sprintf(`SELECT coalesce(pg_catalog.jsonb_agg(pg_catalog.to_jsonb(x) ORDER BY %[1]s), '[]')::text, count(*)
FROM (SELECT %[2]s FROM %[3]s AS t
  WHERE $1::jsonb IS NULL OR (%[2]s) > (SELECT %[4]s FROM pg_catalog.jsonb_populate_record(NULL::%[3]s, $1::jsonb) AS k)
  ORDER BY %[2]s LIMIT %[5]d) AS x`, list("x."), list("t."), tgtName, list("k."), orphanPage)
	existSQL := fmt.Sprintf(`SELECT coalesce(pg_catalog.jsonb_agg(pg_catalog.to_jsonb(x)), '[]')::text
FROM (SELECT %[1]s FROM %[2]s AS s WHERE (%[1]s) IN (SELECT %[3]s FROM pg_catalog.jsonb_populate_recordset(NULL::%[2]s, $1::jsonb) AS k)) AS x`,
		list("s."), srcName, list("k."))
	deleteSQL := fmt.Sprintf(`DELETE FROM %[1]s AS t
WHERE (%[2]s) IN (SELECT %[3]s FROM pg_catalog.jsonb_populate_recordset(NULL::%[1]s, $1::jsonb) AS k)
  AND (%[2]s) NOT IN (SELECT %[4]s FROM pg_catalog.jsonb_populate_recordset(NULL::%[1]s, $2::jsonb) AS e)`,
		tgtName, list("t."), list("k."), list("e."))

	var deleted int64
	var after *string // the last key of the previous page, as JSON
	for {
		var page string
		var n int
		if err := tgt.QueryRow(ctx, pageSQL, after).Scan(&page, &n); err != nil {
			return deleted, fmt.Errorf("read keys of %s: %w", target, err)
		}
		if n == 0 {
			return deleted, nil
		}
		var existing string
		if err := src.QueryRow(ctx, existSQL, page).Scan(&existing); err != nil {
			return deleted, fmt.Errorf("look up keys of %s in %s: %w", target, source, err)
		}
		tag, err := tgt.Exec(ctx, deleteSQL, page, existing)
		if err != nil {
			return deleted, fmt.Errorf("delete orphans of %s: %w", target, err)
		}
		deleted += tag.RowsAffected()
		if n < orphanPage {
			return deleted, nil
		}
		var rows []json.RawMessage
		if err := json.Unmarshal([]byte(page), &rows); err != nil {
			return deleted, fmt.Errorf("keys of %s: %w", target, err)
		}
		last := string(rows[len(rows)-1])
		after = &last
	}
}
