package integration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/magic"
)

// Helpers of the fault suite (faults_test.go).

// setServerOption sets a server parameter with ALTER SYSTEM and reloads the
// configuration; pg must be the test's own container.
func setServerOption(t testing.TB, pg *integration.Postgres, name, value string) {
	t.Helper()
	ctx := context.Background()
	if err := pg.Exec(ctx, "postgres", "ALTER SYSTEM SET "+pgx.Identifier{name}.Sanitize()+" = '"+value+"'"); err != nil {
		t.Fatal(err)
	}
	if err := pg.Exec(ctx, "postgres", "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
}

// walsenderPID returns the PID of the walsender streaming s's slot, 0 when
// none is.
func (s *source) walsenderPID(t testing.TB) int {
	t.Helper()
	return queryInt(t, s.conn, `SELECT coalesce((SELECT r.pid FROM pg_replication_slots sl JOIN pg_stat_replication r ON r.pid = sl.active_pid
WHERE sl.slot_name = $1 AND r.state = 'streaming'), 0)`, s.slot)
}

// waitStreamingAgain waits until a walsender streams s's slot again and
// returns how long that took.
func (s *source) waitStreamingAgain(t testing.TB, timeout time.Duration) time.Duration {
	t.Helper()
	t0 := time.Now()
	integration.WaitFor(t, timeout, "the stream to be back", func() bool { return s.walsenderPID(t) != 0 })
	return time.Since(t0)
}

// waitNewWalsender waits until a walsender other than old streams s's slot
// and returns its PID and how long that took: after a fault that must have
// ended the old one (a pause past wal_sender_timeout, a network cut), the
// stream is back only when a new one streams.
func (s *source) waitNewWalsender(t testing.TB, timeout time.Duration, old int) (int, time.Duration) {
	t.Helper()
	t0 := time.Now()
	var pid int
	integration.WaitFor(t, timeout, fmt.Sprintf("a walsender other than %d to stream the slot", old), func() bool {
		pid = s.walsenderPID(t)
		return pid != 0 && pid != old
	})
	return pid, time.Since(t0)
}

// reconnect replaces s.conn, which died with the server or its network.
func (s *source) reconnect(t testing.TB) {
	t.Helper()
	s.conn = s.db.Connect(t)
}

// requestsByID counts the recorded requests per row id, for the images of
// insertRows (PNG of the row's id).
func requestsByID(t testing.TB, ai *fakeAI, from, to int) (byID map[int]int, foreign int) {
	t.Helper()
	return requestsBy(ai, pngIDs(t, from, to))
}

// requestsBy counts the recorded requests per number that ids gives their
// data URL; foreign counts the requests of data URLs ids does not know.
func requestsBy(ai *fakeAI, ids map[string]int) (counts map[int]int, foreign int) {
	counts = map[int]int{}
	for _, r := range ai.Requests() {
		id, ok := ids[r.DataURL]
		if !ok {
			foreign++
			continue
		}
		counts[id]++
	}
	return counts, foreign
}

// pngIDs maps the data URL of the PNG of each id in [from, to) to the id.
func pngIDs(t testing.TB, from, to int) map[string]int {
	t.Helper()
	ids := map[string]int{}
	for id := from; id < to; id++ {
		ids[magic.DataURL(magic.PNG, pngImage(t, id))] = id
	}
	return ids
}

// assertCallBound checks the calls-per-row bound of a fault: every row was
// requested, and at most rows+extra requests were made in all, where extra
// is what the fault may add (calls in flight or retried); why says so.
func assertCallBound(t testing.TB, ai *fakeAI, from, to, extra int, why string) {
	t.Helper()
	rows := to - from
	byID, foreign := requestsByID(t, ai, from, to)
	if foreign != 0 {
		t.Errorf("%d requests for images of no row", foreign)
	}
	if len(byID) != rows {
		t.Errorf("%d of %d rows requested", len(byID), rows)
	}
	if n := ai.Count(); n > rows+extra {
		t.Errorf("%d requests for %d rows; at most %d allowed (%s)", n, rows, rows+extra, why)
	}
	t.Logf("%d requests for %d rows (bound %d: %s)", ai.Count(), rows, rows+extra, why)
}

// openErrors returns the reason of each open errors row by source_key id,
// failing on a row with two open errors.
func openErrors(t testing.TB, conn *pgx.Conn) map[int]string {
	t.Helper()
	rows, err := conn.Query(context.Background(),
		`SELECT (source_key->>'id')::int, reason FROM pgimageai.errors WHERE resolved_at IS NULL ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]string{}
	for rows.Next() {
		var id int
		var reason string
		if err := rows.Scan(&id, &reason); err != nil {
			t.Fatal(err)
		}
		if prev, ok := got[id]; ok {
			t.Errorf("row %d has two open errors: %s and %s", id, prev, reason)
		}
		got[id] = reason
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	return got
}

// insertEach inserts PNG rows ids [from, to), each in a transaction of its
// own (autocommit, one round trip), and records their expected captions.
func insertEach(t testing.TB, s *source, from, to int, want map[int]string) {
	t.Helper()
	for id := from; id < to; id++ {
		img := pngImage(t, id)
		want[id] = captionOf(magic.DataURL(magic.PNG, img))
		s.exec(t, "INSERT INTO public.photos (id, img) VALUES ($1, $2)", id, img)
	}
}

// startWithBacklog runs a bridge on a database of pg with a 5 ms provider,
// inserts rows 1-200 and returns once 50 results are in: a fault then hits
// a bridge with work in flight. want holds the expected captions.
func startWithBacklog(t *testing.T, pg *integration.Postgres, what string) (*source, *fakeAI, map[int]string) {
	t.Helper()
	s := newSourceOn(t, pg.NewDatabase(t))
	ai := newFakeAI(t)
	ai.Set(5*time.Millisecond, nil)
	s.model(t, "vision", ai, fmt.Sprintf(`{"max_concurrency": %d}`, faultConcurrency))
	s.rule(t, "caption", "vision", "public.captions", "caption")
	s.start(t, s.config(t))
	want := map[int]string{}
	insertRows(t, s, 1, 201, 10, want)
	waitResults(t, s, 50, what)
	return s, ai, want
}
