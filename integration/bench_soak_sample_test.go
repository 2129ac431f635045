package integration_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// The soak benchmark's samples: what it reads from the bridge's /metrics and
// pprof endpoints and from the database, what must come back, and the table
// it logs.

// soakSample is one sample of the figures, by name, and the raw scrape.
type soakSample struct {
	v      map[string]float64
	series map[string]float64
}

// sample reads the figures and keeps the scrape, the bridge's connections
// and its goroutine and heap profiles in k.dir, named by label.
func (k *soak) sample(b *testing.B, label string) soakSample {
	b.Helper()
	ctx := context.Background()
	// The heap profile first: ?gc=1 collects garbage before it is taken,
	// so that the scrape's heap figures are the live heap.
	k.keep(b, label+"-heap.pb.gz", k.pprof+"/debug/pprof/heap?gc=1")
	out := soakSample{v: map[string]float64{}, series: scrape(b, k.metrics)}
	out.v["goroutines"] = out.series["go_goroutines"]
	out.v["heap_live_mib"] = out.series["go_memstats_heap_alloc_bytes"] / (1 << 20)
	out.v["heap_objects"] = out.series["go_memstats_heap_objects"]
	out.v["rss_mib"] = out.series["process_resident_memory_bytes"] / (1 << 20)
	out.v["open_fds"] = out.series["process_open_fds"]
	out.v["metrics_series"] = float64(len(out.series))
	out.v["connections"] = float64(queryInt(b, k.s.conn, `SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'pgimageai%'`))
	out.v["slot_lag_bytes"] = float64(queryInt(b, k.s.conn, `SELECT (pg_current_wal_lsn() - confirmed_flush_lsn)::bigint FROM pg_replication_slots WHERE slot_name = $1`, k.s.slot))
	out.v["live_lanes"] = float64(queryInt(b, k.s.conn, `SELECT count(DISTINCT target_table) FROM pgimageai.rules WHERE enabled`))
	out.v["lane_checkpoints_of_slot"] = float64(queryInt(b, k.s.conn, `SELECT count(*) FROM pgimageai.lane_checkpoints WHERE slot = $1`, k.s.slot))
	out.v["errors_open"] = float64(queryInt(b, k.s.conn, `SELECT count(*) FROM pgimageai.errors WHERE resolved_at IS NULL`))
	out.v["results_of_deleted_source_rows"] = float64(queryInt(b, k.s.conn, soakOrphanResults))
	out.v["results_of_deleted_rules"] = float64(queryInt(b, k.s.conn, `SELECT count(*) FROM pgimageai.results WHERE rule NOT IN (SELECT name FROM pgimageai.rules)`))
	rows, err := k.s.conn.Query(ctx, `SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c
WHERE c.relnamespace = 'pgimageai'::regnamespace AND c.relkind = 'r' ORDER BY 1`)
	if err != nil {
		b.Fatal(err)
	}
	sizes := map[string]int64{}
	for rows.Next() {
		var name string
		var size int64
		if err := rows.Scan(&name, &size); err != nil {
			b.Fatal(err)
		}
		sizes[name] = size
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	for name, size := range sizes {
		out.v["table "+name+" rows"] = float64(queryInt(b, k.s.conn, `SELECT count(*) FROM `+pgx.Identifier{"pgimageai", name}.Sanitize()))
		out.v["table "+name+" KiB"] = float64(size) / 1024
	}
	k.keep(b, label+"-goroutines.txt", k.pprof+"/debug/pprof/goroutine?debug=1")
	k.keep(b, label+"-metrics.txt", k.metrics+"/metrics")
	conns, err := k.s.conn.Query(ctx, `SELECT backend_type, coalesce(state, ''), left(regexp_replace(query, '\s+', ' ', 'g'), 80) FROM pg_stat_activity
WHERE application_name LIKE 'pgimageai%' ORDER BY 1, 3`)
	if err != nil {
		b.Fatal(err)
	}
	var lines []string
	for conns.Next() {
		var bt, state, q string
		if err := conns.Scan(&bt, &state, &q); err != nil {
			b.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("%s\t%s\t%s", bt, state, q))
	}
	if err := os.WriteFile(filepath.Join(k.dir, label+"-connections.txt"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	return out
}

// soakOrphanResults counts the pgimageai.results rows of the live rules
// whose source row is gone: a deleted row's stored input is deleted with it.
const soakOrphanResults = `SELECT count(*) FROM pgimageai.results r WHERE
  (r.rule = 'queue' AND NOT EXISTS (SELECT FROM public.queue q WHERE q.id = (r.source_key->>'id')::bigint))
  OR (r.rule = 'steady' AND NOT EXISTS (SELECT FROM public.photos p WHERE p.id = (r.source_key->>'id')::int))
  OR (r.rule = 'flaky' AND NOT EXISTS (SELECT FROM public.flaky f WHERE f.id = (r.source_key->>'id')::int))`

// keep saves what url serves to name in k.dir.
func (k *soak) keep(b *testing.B, name, url string) {
	b.Helper()
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(k.dir, name), body, 0o644); err != nil {
		b.Fatal(err)
	}
}

// notBack lists the figures of end that must equal, or come back to within
// a small margin of, start's, or be zero (stored inputs of deleted rows).
func (k *soak) notBack(start, end soakSample) []string {
	var out []string
	if g0, g := start.v["goroutines"], end.v["goroutines"]; g > g0+max(5, g0/10) {
		out = append(out, fmt.Sprintf("goroutines %.0f at the end, %.0f at the start (see %s)", g, g0, filepath.Join(k.dir, "end-goroutines.txt")))
	}
	if c0, c := start.v["connections"], end.v["connections"]; c > c0 {
		out = append(out, fmt.Sprintf("the bridge's connections %.0f at the end, %.0f at the start (see %s)", c, c0, filepath.Join(k.dir, "end-connections.txt")))
	}
	if l, want := end.v["lane_checkpoints_of_slot"], end.v["live_lanes"]; l != want {
		out = append(out, fmt.Sprintf("%.0f lane_checkpoints rows of the slot for %.0f live lanes", l, want))
	}
	if n := end.v["results_of_deleted_source_rows"]; n > 0 {
		out = append(out, fmt.Sprintf("%.0f pgimageai.results rows of live rules whose source row was deleted", n))
	}
	if lag := end.v["slot_lag_bytes"]; lag > 1<<20 {
		out = append(out, fmt.Sprintf("the slot lags %.0f bytes after the catch-up", lag))
	}
	return out
}

// seriesLeft lists, by rule, model or lane, the /metrics series of end
// that name a deleted one (churn_*, drop_*, their tables): how many and of
// which metrics.
func seriesLeft(end soakSample) []string {
	left := map[string]map[string]int{} // label="value" -> metric -> series
	for s := range end.series {
		name, labels, _ := strings.Cut(s, "{")
		for _, l := range strings.Split(strings.TrimSuffix(labels, "}"), ",") {
			_, v, _ := strings.Cut(l, "=")
			v = strings.Trim(v, `"`)
			v = strings.TrimPrefix(v, "public.")
			if strings.HasPrefix(v, "churn_") || strings.HasPrefix(v, "drop_") {
				if left[l] == nil {
					left[l] = map[string]int{}
				}
				left[l][strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")]++
			}
		}
	}
	var out []string
	for l, byName := range left {
		var parts []string
		for n, c := range byName {
			parts = append(parts, fmt.Sprintf("%s ×%d", n, c))
		}
		sort.Strings(parts)
		out = append(out, l+": "+strings.Join(parts, ", "))
	}
	sort.Strings(out)
	return out
}

// leftovers lists what the deleted rules left that must not stay: a target
// made again after its rule was deleted and it was dropped, open errors.
func (k *soak) leftovers(b *testing.B, end soakSample) []string {
	var out []string
	var made []string
	if err := k.s.conn.QueryRow(context.Background(), `SELECT coalesce(array_agg(tablename ORDER BY tablename), '{}') FROM pg_tables
WHERE schemaname = 'public' AND (tablename LIKE 'churn\_%' OR tablename LIKE 'drop\_%')`).Scan(&made); err != nil {
		b.Fatal(err)
	}
	if len(made) > 0 {
		out = append(out, fmt.Sprintf("%d tables of deleted rules made again after they were dropped: %s", len(made), strings.Join(made, ", ")))
	}
	if n := end.v["errors_open"]; n != 0 {
		out = append(out, fmt.Sprintf("%.0f open errors rows after the catch-up", n))
	}
	return out
}

// logCount counts the lines of the bridge's log that contain s.
func (k *soak) logCount(b *testing.B, s string) int {
	logb, err := os.ReadFile(k.p.log.Name())
	if err != nil {
		b.Fatal(err)
	}
	return strings.Count(string(logb), s)
}

// soakTable formats start and end side by side, the ratio where start is
// not zero.
func soakTable(start, end soakSample) string {
	names := make([]string, 0, len(end.v))
	for n := range end.v {
		names = append(names, n)
	}
	sort.Strings(names)
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-40s %12s %12s %8s\n", "figure", "start", "end", "end/start")
	for _, n := range names {
		s, e := start.v[n], end.v[n]
		ratio := "-"
		if s != 0 {
			ratio = fmt.Sprintf("%.2f", e/s)
		}
		fmt.Fprintf(&sb, "%-40s %12.1f %12.1f %8s\n", n, s, e, ratio)
	}
	return sb.String()
}
