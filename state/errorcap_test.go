package state_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/migrations"
	"github.com/pgimageai/pgimageai/state"
)

// writeErrors writes an errors row of rule for each id in one transaction
// on conn, as a lane does, and returns which the cap dropped.
func writeErrors(tb testing.TB, q interface {
	SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
}, rule string, ids ...int) []bool {
	tb.Helper()
	dropped := make([]bool, len(ids))
	b := &pgx.Batch{}
	for i, id := range ids {
		state.Error{Rule: rule, SourceTable: "public.t", Key: []byte(fmt.Sprintf(`{"id": %d}`, id)),
			Reason: "empty_image", Detail: "the image is empty", Dropped: &dropped[i]}.Queue(b)
	}
	if err := q.SendBatch(context.Background(), b).Close(); err != nil {
		tb.Fatal(err)
	}
	return dropped
}

// errorCounts returns the open count and the dropped count of rule, as
// pgimageai.error_counts says and as pgimageai.errors says (open rows).
func errorCounts(tb testing.TB, conn *pgx.Conn, rule string) (open, dropped, openRows int64) {
	tb.Helper()
	err := conn.QueryRow(context.Background(), `SELECT coalesce((SELECT open FROM pgimageai.error_counts WHERE rule = $1), 0),
  coalesce((SELECT dropped FROM pgimageai.error_counts WHERE rule = $1), 0),
  (SELECT count(*) FROM pgimageai.errors WHERE rule = $1 AND resolved_at IS NULL)`, rule).Scan(&open, &dropped, &openRows)
	if err != nil {
		tb.Fatal(err)
	}
	return open, dropped, openRows
}

// TestErrorCap: a rule at its cap of open errors rows counts a failure of a
// row without an open row as dropped instead of writing it, still updates
// the open row of a row that fails again, and records again once rows are
// resolved; the count of open rows follows every way rows are opened,
// resolved, deleted or truncated; a rule's own cap wins over '*', and NULL
// means no cap.
func TestErrorCap(t *testing.T) {
	conn := migrated(t)
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	check := func(rule string, wantOpen, wantDropped int64) {
		t.Helper()
		open, dropped, rows := errorCounts(t, conn, rule)
		if open != wantOpen || dropped != wantDropped || rows != wantOpen {
			t.Errorf("%s: open %d (rows %d), dropped %d; want open %d, dropped %d", rule, open, rows, dropped, wantOpen, wantDropped)
		}
	}
	var def int64
	if err := conn.QueryRow(ctx, "SELECT max_open FROM pgimageai.error_caps WHERE rule = '*'").Scan(&def); err != nil || def != 100000 {
		t.Fatalf("default cap = %d, %v; want 100000", def, err)
	}
	exec("INSERT INTO pgimageai.error_caps (rule, max_open) VALUES ('capped', 3)")

	got := writeErrors(t, conn, "capped", 1, 2, 3, 4, 5)
	if want := []bool{false, false, false, true, true}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("dropped = %v, want %v", got, want)
	}
	check("capped", 3, 2)

	// At the cap, a row with an open row still has it updated.
	if got := writeErrors(t, conn, "capped", 1); got[0] {
		t.Error("a row with an open errors row was dropped at the cap")
	}
	var attempts int
	if err := conn.QueryRow(ctx, `SELECT attempts FROM pgimageai.errors WHERE rule = 'capped' AND source_key = '{"id": 1}'`).Scan(&attempts); err != nil || attempts != 2 {
		t.Errorf("attempts = %d, %v; want 2", attempts, err)
	}
	check("capped", 3, 2)

	// Resolved rows make room: one resolved, one more recorded.
	b := &pgx.Batch{}
	state.Resolves{Rule: "capped", Keys: []string{`{"id": 1}`}}.Queue(b)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	check("capped", 2, 2)
	if got := writeErrors(t, conn, "capped", 6, 7); !got[1] || got[0] {
		t.Errorf("dropped = %v, want [false true]", got)
	}
	check("capped", 3, 3)

	// By hand: a deleted open row, a reopened one, a truncate.
	exec(`DELETE FROM pgimageai.errors WHERE rule = 'capped' AND source_key = '{"id": 6}'`)
	check("capped", 2, 3)
	exec(`UPDATE pgimageai.errors SET resolved_at = NULL WHERE rule = 'capped' AND source_key = '{"id": 1}'`)
	check("capped", 3, 3)

	// Another rule has the default cap; NULL lifts the cap.
	writeErrors(t, conn, "other", 1, 2, 3, 4)
	check("other", 4, 0)
	exec("UPDATE pgimageai.error_caps SET max_open = NULL WHERE rule = 'capped'")
	if got := writeErrors(t, conn, "capped", 8, 9); got[0] || got[1] {
		t.Errorf("dropped without a cap: %v", got)
	}
	check("capped", 5, 3)
	exec("UPDATE pgimageai.error_caps SET max_open = 0 WHERE rule = '*'")
	if got := writeErrors(t, conn, "other", 5); !got[0] {
		t.Error("the '*' cap of 0 did not drop")
	}
	check("other", 4, 1)

	exec("TRUNCATE pgimageai.errors")
	check("capped", 0, 3)
	check("other", 0, 1)
}

// TestErrorCapConcurrent: two transactions writing errors of one rule at
// once never exceed its cap: the second waits for the first's count.
func TestErrorCapConcurrent(t *testing.T) {
	conn := migrated(t)
	ctx := context.Background()
	other, err := pgx.Connect(ctx, conn.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "INSERT INTO pgimageai.error_caps (rule, max_open) VALUES ('r', 5)"); err != nil {
		t.Fatal(err)
	}
	writeErrors(t, conn, "r", 0) // the counts row exists, as after the rule's first failure
	tx1, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	writeErrors(t, tx1, "r", 1, 2, 3)
	done := make(chan []bool)
	go func() {
		tx2, err := other.Begin(ctx)
		if err != nil {
			t.Error(err)
			close(done)
			return
		}
		dropped := writeErrors(t, tx2, "r", 11, 12, 13, 14)
		if err := tx2.Commit(ctx); err != nil {
			t.Error(err)
		}
		done <- dropped
	}()
	time.Sleep(300 * time.Millisecond) // the second transaction waits for the first's lock
	writeErrors(t, tx1, "r", 4)
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if want := []bool{true, true, true, true}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("second transaction dropped %v, want %v", got, want)
	}
	open, dropped, rows := errorCounts(t, conn, "r")
	if open != 5 || rows != 5 || dropped != 4 {
		t.Errorf("open %d (rows %d), dropped %d; want 5, 4", open, rows, dropped)
	}
}

// TestMigrationGrants: the migrations grant what the bridge needs of the
// tables they add (the error cap, the retention of retry requests, slot
// gaps, created targets, batch cleanup, lanes pending) to every role that
// may already write the bridge's state, so that a bridge role set up before
// them needs no new GRANT.
func TestMigrationGrants(t *testing.T) {
	conn := migrated(t)
	ctx := context.Background()
	var role string
	if err := conn.QueryRow(ctx, "SELECT 'r_' || current_database()").Scan(&role); err != nil {
		t.Fatal(err)
	}
	ident := pgx.Identifier{role}.Sanitize()
	for _, sql := range []string{"CREATE ROLE " + ident, "GRANT INSERT ON pgimageai.lane_checkpoints TO " + ident} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { conn.Exec(context.Background(), "DROP OWNED BY "+ident+"; DROP ROLE "+ident) })
	ms, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	// The migrations' grants, run again now that the role exists: as if it
	// had been set up before them.
	n := 0
	for _, m := range ms {
		for _, line := range strings.Split(m.SQL, "\n") {
			if strings.HasPrefix(line, "SELECT pgimageai.grant_to_bridge_roles(") {
				if _, err := conn.Exec(ctx, line); err != nil {
					t.Fatalf("migration %d: %s: %v", m.Version, line, err)
				}
				n++
			}
		}
	}
	if n < 9 {
		t.Fatalf("%d grant statements in the migrations, want at least 9", n)
	}
	for _, c := range []struct{ table, privilege string }{
		{"pgimageai.error_caps", "SELECT"}, {"pgimageai.error_counts", "UPDATE"}, {"pgimageai.error_counts", "INSERT"},
		{"pgimageai.retry_requests", "DELETE"}, {"pgimageai.slot_gaps", "INSERT"}, {"pgimageai.slot_gaps", "UPDATE"},
		{"pgimageai.created_targets", "INSERT"}, {"pgimageai.batch_cleanup", "DELETE"}, {"pgimageai.lane_pending", "INSERT"},
		{"pgimageai.lane_pending", "DELETE"},
	} {
		var ok bool
		if err := conn.QueryRow(ctx, "SELECT has_table_privilege($1, $2, $3)", role, c.table, c.privilege).Scan(&ok); err != nil || !ok {
			t.Errorf("%s on %s: %v (%v)", c.privilege, c.table, ok, err)
		}
	}
	for _, seq := range []string{"pgimageai.slot_gaps_id_seq", "pgimageai.batch_cleanup_id_seq"} {
		var ok bool
		if err := conn.QueryRow(ctx, "SELECT has_sequence_privilege($1, $2, 'USAGE')", role, seq).Scan(&ok); err != nil || !ok {
			t.Errorf("USAGE on %s: %v (%v)", seq, ok, err)
		}
	}
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT has_column_privilege($1, 'pgimageai.retry_requests', 'seen_lsn', 'UPDATE')", role).Scan(&ok); err != nil || !ok {
		t.Errorf("UPDATE on retry_requests.seen_lsn: %v (%v)", ok, err)
	}
	// Only the migrating role may run the helper.
	if err := conn.QueryRow(ctx, "SELECT has_function_privilege('public', 'pgimageai.grant_to_bridge_roles(text)', 'EXECUTE')").Scan(&ok); err != nil || ok {
		t.Errorf("PUBLIC may execute pgimageai.grant_to_bridge_roles: %v (%v)", ok, err)
	}
}
