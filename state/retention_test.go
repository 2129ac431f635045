package state_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/state"
)

// TestPrune: the retention deletes what pgimageai.retention says is old, in
// batches (1,500 results of a deleted rule go in two statements), keeps
// everything of a kind whose keep is NULL, and drops the results, Batch
// API answers and error counts of rules that no longer exist while
// resolving — not deleting — their open errors. Rows of existing rules and recent rows stay.
func TestPrune(t *testing.T) {
	conn := migrated(t)
	ctx := context.Background()
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`INSERT INTO pgimageai.errors (rule, source_table, source_key, reason, detail, resolved_at) VALUES
  ('kept', 'public.t', '{"id":1}', 'provider_error', 'old', now() - interval '40 days'),
  ('kept', 'public.t', '{"id":2}', 'provider_error', 'recent', now() - interval '1 day'),
  ('kept', 'public.t', '{"id":3}', 'provider_error', 'open', NULL),
  ('gone', 'public.t', '{"id":4}', 'provider_error', 'open of a deleted rule', NULL)`)
	exec(`INSERT INTO pgimageai.usage (rule, model, day, calls) VALUES
  ('kept', 'm', current_date - 500, 1), ('kept', 'm', current_date - 1, 1)`)
	exec(`INSERT INTO pgimageai.own_xacts (xid, created_at) VALUES (1, now() - interval '8 days'), (2, now())`)
	exec(`INSERT INTO pgimageai.results (rule, source_key, input_key)
  SELECT 'gone', jsonb_build_object('id', i), '\x00'::bytea FROM generate_series(1, 1500) i
  UNION ALL SELECT 'kept', '{"id":1}', '\x00'::bytea`)
	exec(`INSERT INTO pgimageai.batch_answers (rule, source_key, input_key, answer) VALUES
  ('gone', '{"id":1}', '\x00', 'a'), ('kept', '{"id":1}', '\x00', 'b')`)
	// A running switch's side rule is in no rule row, and is kept.
	exec(`INSERT INTO pgimageai.switches (rule, from_version, to_version, side_rule, target_table, live_column, shadow_column)
  VALUES ('kept', 'a', 'b', 'kept@b', 'public.t', 'v', 'v__vb')`)
	exec(`INSERT INTO pgimageai.results (rule, source_key, input_key) VALUES ('kept@b', '{"id":1}', '\x00')`)
	exec(`INSERT INTO pgimageai.errors (rule, source_table, source_key, reason, detail) VALUES ('kept@b', 'public.t', '{"id":5}', 'bad_response', 'side')`)

	exec(`INSERT INTO pgimageai.parked (rule, source_key, source_table, model, lsn) VALUES
  ('gone', '{"id":1}', 'public.t', 'm', '0/1'), ('kept', '{"id":1}', 'public.t', 'm', '0/1')`)

	pruned, err := state.Prune(ctx, conn, []string{"kept"})
	if err != nil {
		t.Fatal(err)
	}
	want := state.Pruned{"errors": 1, "usage": 1, "own_xacts": 1, "model_pace": 0, "results": 1500, "batch_answers": 1, "errors_resolved": 1, "error_counts": 1, "parked": 1}
	for k, n := range want {
		if pruned[k] != n {
			t.Errorf("pruned %s: %d, want %d (all: %v)", k, pruned[k], n, pruned)
		}
	}
	count := func(sql string) int {
		t.Helper()
		var n int
		if err := conn.QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	checks := []struct {
		sql  string
		want int
	}{
		{"SELECT count(*) FROM pgimageai.errors WHERE detail = 'old'", 0},
		{"SELECT count(*) FROM pgimageai.errors WHERE detail IN ('recent', 'open')", 2},
		{"SELECT count(*) FROM pgimageai.errors WHERE rule = 'gone' AND resolved_at IS NOT NULL", 1},
		{"SELECT count(*) FROM pgimageai.usage", 1},
		{"SELECT count(*) FROM pgimageai.own_xacts WHERE xid = 2", 1},
		{"SELECT count(*) FROM pgimageai.results", 2},
		{"SELECT count(*) FROM pgimageai.results WHERE rule = 'kept@b'", 1},
		{"SELECT count(*) FROM pgimageai.errors WHERE rule = 'kept@b' AND resolved_at IS NULL", 1},
		{"SELECT count(*) FROM pgimageai.batch_answers WHERE rule = 'kept'", 1},
		{"SELECT count(*) FROM pgimageai.parked WHERE rule = 'kept'", 1},
		{"SELECT count(*) FROM pgimageai.parked", 1},
		{"SELECT count(*) FROM pgimageai.error_counts WHERE rule = 'gone'", 0},
		{"SELECT open FROM pgimageai.error_counts WHERE rule = 'kept'", 1},
	}
	for _, c := range checks {
		if n := count(c.sql); n != c.want {
			t.Errorf("%s = %d, want %d", c.sql, n, c.want)
		}
	}

	// keep NULL keeps everything of its kind; nil rules leave other rules' rows alone.
	exec(`UPDATE pgimageai.retention SET keep = NULL WHERE what = 'usage'`)
	exec(`INSERT INTO pgimageai.usage (rule, model, day, calls) VALUES ('kept', 'm', current_date - 900, 1)`)
	exec(`INSERT INTO pgimageai.results (rule, source_key, input_key) VALUES ('other', '{"id":1}', '\x00')`)
	if pruned, err = state.Prune(ctx, conn, nil); err != nil {
		t.Fatal(err)
	}
	if n := count("SELECT count(*) FROM pgimageai.usage"); n != 2 || pruned["usage"] != 0 {
		t.Errorf("%d usage rows after a pass with keep NULL (pruned %d), want 2", n, pruned["usage"])
	}
	if n := count("SELECT count(*) FROM pgimageai.results WHERE rule = 'other'"); n != 1 {
		t.Errorf("a pass without the rule list deleted another rule's results")
	}
}

// TestPruneRetryRequests: a retry request is deleted only once the slot has
// confirmed a position past its commit — noted by one pass, deleted by a
// later one — and once it is older than its keep; keep NULL keeps them all.
func TestPruneRetryRequests(t *testing.T) {
	conn := migrated(t)
	ctx := context.Background()
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	var slot string
	if err := conn.QueryRow(ctx, "SELECT slot_name FROM pg_create_logical_replication_slot(current_database(), 'pgoutput')").Scan(&slot); err != nil {
		t.Fatal(err)
	}
	prune := func(want int64) {
		t.Helper()
		n, err := state.PruneRetryRequests(ctx, conn, slot)
		if err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("pruned %d retry requests, want %d", n, want)
		}
	}
	remaining := func() (ids []int64) {
		t.Helper()
		rows, _ := conn.Query(ctx, "SELECT id FROM pgimageai.retry_requests ORDER BY id")
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	advance := func() {
		t.Helper()
		exec("SELECT pg_replication_slot_advance(current_database(), pg_current_wal_lsn())")
	}
	exec("UPDATE pgimageai.retention SET keep = '0' WHERE what = 'retry_requests'")
	exec("INSERT INTO pgimageai.retry_requests (rule) VALUES ('a')") // id 1
	prune(0)                                                         // notes where it is
	prune(0)                                                         // the slot has not passed it
	exec("INSERT INTO pgimageai.retry_requests (rule) VALUES ('b')") // id 2: not noted yet
	advance()
	prune(1)
	if got := remaining(); len(got) != 1 || got[0] != 2 {
		t.Errorf("left %v, want [2]", got)
	}
	advance()
	prune(1)

	// Younger than its keep: kept even behind the slot; NULL: kept for good.
	exec("UPDATE pgimageai.retention SET keep = '1 day' WHERE what = 'retry_requests'")
	exec("INSERT INTO pgimageai.retry_requests (rule, requested_at) VALUES ('c', now() - interval '2 days'), ('d', now())")
	prune(0)
	advance()
	prune(1)
	if got := remaining(); len(got) != 1 {
		t.Errorf("left %v, want the recent one", got)
	}
	exec("UPDATE pgimageai.retention SET keep = NULL WHERE what = 'retry_requests'")
	exec("UPDATE pgimageai.retry_requests SET requested_at = now() - interval '10 years'")
	advance()
	prune(0)
}
