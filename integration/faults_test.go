package integration_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/migrations"
)

// The fault suite: one fault each, on real PostgreSQL. Every test
// checks that the target ends equal to an uninterrupted run's (nothing lost,
// no duplicate effect), bounds the provider requests per row, and logs how
// long the recovery took (measured, never asserted).

// faultConcurrency is the models' max_concurrency: the number of calls that
// can be in flight, and so made again, when a fault hits.
const faultConcurrency = 8

// TestFaultPausedServer freezes the server (docker pause) for longer than its
// wal_sender_timeout, with rows in flight, and then resumes it.
func TestFaultPausedServer(t *testing.T) {
	pg := integration.StartPostgres(t)
	const walSenderTimeout = 5 * time.Second
	setServerOption(t, pg, "wal_sender_timeout", "5s")
	s, ai, want := startWithBacklog(t, pg, "before the pause")
	pid := s.walsenderPID(t)
	ctx := t.Context()
	if err := pg.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(walSenderTimeout + 3*time.Second)
	if err := pg.Unpause(ctx); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	insertRows(t, s, 201, 401, 10, want)
	// The stream is back when the slot confirms what was written after the
	// pause — by the walsender that was frozen with the server (the bridge's
	// status updates, queued meanwhile, reach it before its timeout does)
	// or by a new one; either is fine, the slot moving is not optional.
	s.sync(t, 60*time.Second)
	back := time.Since(t0)
	after := s.walsenderPID(t)
	if after == 0 {
		t.Error("no walsender streams the slot after the pause")
	}

	assertCaptions(t, captions(t, s.conn), want)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors"); n != 0 {
		t.Errorf("%d errors rows", n)
	}
	assertCallBound(t, ai, 1, 401, faultConcurrency, "rows plus the calls in flight at the pause")
	t.Logf("paused %s (wal_sender_timeout %s); walsender %d before, %d after; recovery after the unpause: the slot confirmed the 200 new rows in %s",
		walSenderTimeout+3*time.Second, walSenderTimeout, pid, after,
		back.Round(time.Millisecond))
}

// TestFaultNetworkCut disconnects the server's container from its Docker
// network and connects it again, with rows in flight. Disconnecting ends the
// engine's proxy of the published port, so the bridge's connections are cut
// at once; the server's side of them lingers until it sends. The published
// port survives the reconnect (checked), so the DSN stays valid.
func TestFaultNetworkCut(t *testing.T) {
	pg := integration.StartPostgres(t)
	s, ai, want := startWithBacklog(t, pg, "before the cut")
	pid := s.walsenderPID(t)
	dsn := s.db.DSN()
	ctx := t.Context()
	if err := pg.Disconnect(ctx); err != nil {
		t.Fatal(err)
	}
	// The cut is real: nothing reaches the server.
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	if conn, err := pgx.Connect(cctx, dsn); err == nil {
		conn.Close(ctx)
		cancel()
		t.Fatal("the server is still reachable after the network disconnect")
	}
	cancel()
	time.Sleep(3 * time.Second)
	if err := pg.Reconnect(ctx); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if got := s.db.DSN(); got != dsn {
		t.Fatalf("the published port changed across the reconnect: %s, was %s", got, dsn)
	}
	s.reconnect(t)
	insertRows(t, s, 201, 401, 10, want)
	now, back := s.waitNewWalsender(t, 60*time.Second, pid)
	s.sync(t, 60*time.Second)
	applied := time.Since(t0)

	assertCaptions(t, captions(t, s.conn), want)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors"); n != 0 {
		t.Errorf("%d errors rows", n)
	}
	assertCallBound(t, ai, 1, 401, faultConcurrency, "rows plus the calls in flight at the cut")
	if s.walsenderPID(t) == pid {
		t.Error("the walsender of the cut connection streams again")
	}
	t.Logf("network cut 3s; walsender %d before, %d after; recovery after the reconnect: stream back in %s, backlog applied in %s",
		pid, now, back.Round(time.Millisecond), applied.Round(time.Millisecond))
}

// TestFaultProviderHangs makes the provider hang on the first request of
// every fifth image: the model's timeout ends each such request, the call is
// retried, and the result arrives. Exactly one extra request per hung image.
func TestFaultProviderHangs(t *testing.T) {
	s := newSource(t)
	ai := newFakeAI(t)
	const timeout = time.Second
	ids := pngIDs(t, 1, 101)
	var mu sync.Mutex
	seen := map[int]int{}
	var lastHangEnd time.Time
	ai.SetHook(func(w http.ResponseWriter, r *http.Request, req aiRequest) bool {
		id := ids[req.DataURL]
		mu.Lock()
		seen[id]++
		first := seen[id] == 1
		mu.Unlock()
		if id%5 != 0 || !first {
			return false
		}
		<-r.Context().Done() // hang until the client gives up
		mu.Lock()
		lastHangEnd = time.Now()
		mu.Unlock()
		return true
	})
	s.model(t, "vision", ai, fmt.Sprintf(`{"max_concurrency": %d, "timeout": %q}`, faultConcurrency, timeout))
	s.rule(t, "caption", "vision", "public.captions", "caption")
	s.start(t, s.config(t))

	want := map[int]string{}
	t0 := time.Now()
	insertRows(t, s, 1, 101, 10, want)
	s.sync(t, 60*time.Second)
	done := time.Now()

	assertCaptions(t, captions(t, s.conn), want)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors"); n != 0 {
		t.Errorf("%d errors rows", n)
	}
	byID, _ := requestsByID(t, ai, 1, 101)
	for id := 1; id <= 100; id++ {
		wantN := 1
		if id%5 == 0 {
			wantN = 2 // the hung request, ended by the timeout, and its retry
		}
		if byID[id] != wantN {
			t.Errorf("row %d: %d requests, want %d", id, byID[id], wantN)
		}
	}
	assertCallBound(t, ai, 1, 101, 20, "one retry for each of the 20 hung requests")
	mu.Lock()
	defer mu.Unlock()
	t.Logf("20 of 100 requests hung (timeout %s): all applied %s after the insert; recovery from the last timeout to the backlog applied: %s",
		timeout, done.Sub(t0).Round(time.Millisecond), done.Sub(lastHangEnd).Round(time.Millisecond))
}

// TestFaultProviderGarbage: while the provider is broken it answers some
// images with garbage (200, not JSON) and some with a body cut mid-JSON
// (a Content-Length larger than what it sends), once or every time.
//
// Per the provider contract: a cut body is an I/O error, retried (max_retries 2); the
// image cut once gets its result; the image cut every time fails for good
// with provider_error once the retries are spent; garbage is an answer that
// cannot be used, bad_response at once without a retry. Both leave a NULL
// result and one open errors row. Once the provider is well, a retry message
// reprocesses exactly the failed rows and resolves their errors.
func TestFaultProviderGarbage(t *testing.T) {
	s := newSource(t)
	ai := newFakeAI(t)
	const rows = 60
	ids := pngIDs(t, 1, rows+1)
	const (
		garbage   = 0 // id%4: 200 with an HTML body
		cutOnce   = 1 // the first answer cut mid-JSON, then well
		cutAlways = 2 // every answer cut while broken
	)
	var mu sync.Mutex
	broken := true
	seen := map[int]int{}
	ai.SetHook(func(w http.ResponseWriter, r *http.Request, req aiRequest) bool {
		id := ids[req.DataURL]
		mu.Lock()
		seen[id]++
		n, isBroken := seen[id], broken
		mu.Unlock()
		switch {
		case isBroken && id%4 == garbage:
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html><body><h1>502 Bad Gateway</h1></body></html>")
			return true
		case id%4 == cutOnce && n == 1, isBroken && id%4 == cutAlways:
			body := fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-test","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":%q}}]}`,
				captionOf(req.DataURL))
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			io.WriteString(w, body[:len(body)/2]) // the server closes the connection after the handler
			return true
		}
		return false
	})
	const maxRetries = 2
	s.model(t, "vision", ai, fmt.Sprintf(`{"max_concurrency": %d, "max_retries": %d}`, faultConcurrency, maxRetries))
	s.rule(t, "caption", "vision", "public.captions", "caption")
	s.start(t, s.config(t))

	want := map[int]string{}
	insertRows(t, s, 1, rows+1, 10, want)
	s.sync(t, 60*time.Second)

	got := captions(t, s.conn)
	errs := openErrors(t, s.conn)
	byID, _ := requestsByID(t, ai, 1, rows+1)
	for id := 1; id <= rows; id++ {
		wantCaption, wantReason, wantCalls := want[id], "", 1
		switch id % 4 {
		case garbage:
			wantCaption, wantReason = "<NULL>", "bad_response"
		case cutOnce:
			wantCalls = 2
		case cutAlways:
			wantCaption, wantReason, wantCalls = "<NULL>", "provider_error", 1+maxRetries
		}
		if got[id] != wantCaption {
			t.Errorf("while broken, row %d: caption %q, want %q", id, got[id], wantCaption)
		}
		if errs[id] != wantReason {
			t.Errorf("while broken, row %d: open error %q, want %q", id, errs[id], wantReason)
		}
		if byID[id] != wantCalls {
			t.Errorf("while broken, row %d: %d requests, want %d", id, byID[id], wantCalls)
		}
	}
	if len(got) != rows {
		t.Errorf("target has %d rows, want %d", len(got), rows)
	}
	var detail string
	if err := s.conn.QueryRow(t.Context(), `SELECT detail FROM pgimageai.errors WHERE reason = 'bad_response' LIMIT 1`).Scan(&detail); err != nil {
		t.Fatal(err)
	}
	t.Logf("bad_response detail: %s", detail)
	if t.Failed() {
		t.FailNow()
	}

	// The provider recovers; a retry fixes the failed rows, and only them.
	mu.Lock()
	broken = false
	mu.Unlock()
	before := ai.Count()
	t0 := time.Now()
	s.exec(t, `INSERT INTO pgimageai.retry_requests DEFAULT VALUES`)
	s.sync(t, 60*time.Second)
	recovered := time.Since(t0)

	assertCaptions(t, captions(t, s.conn), want)
	if errs := openErrors(t, s.conn); len(errs) != 0 {
		t.Errorf("%d errors still open after the retry: %v", len(errs), errs)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE resolved_at IS NOT NULL"); n != rows/2 {
		t.Errorf("%d resolved errors rows, want %d", n, rows/2)
	}
	after, _ := requestsByID(t, ai, 1, rows+1)
	for id := 1; id <= rows; id++ {
		wantAgain := 0
		if id%4 == garbage || id%4 == cutAlways {
			wantAgain = 1
		}
		if n := after[id] - byID[id]; n != wantAgain {
			t.Errorf("retry: row %d requested %d times, want %d", id, n, wantAgain)
		}
	}
	// 15 cut once: +1 each; 15 cut always: +max_retries each; 30 failed rows retried: +1 each.
	assertCallBound(t, ai, 1, rows+1, 15+15*maxRetries+30, "the cut answers retried, and one retry per failed row")
	t.Logf("retry made %d requests; recovery from the retry message to the rows fixed: %s", ai.Count()-before, recovered.Round(time.Millisecond))
}

// TestFaultTargetRefusesWrites makes the target database read-only (a
// separate database, as with --target-dsn) while a backlog arrives: the bridge
// retries its writes, backs up to the stream, and then — with the stream
// blocked on the full event channel — the source server is stopped with a
// fast shutdown, which the bridge must not hold up. Then the source starts
// again, the target takes writes again, and everything is applied once.
func TestFaultTargetRefusesWrites(t *testing.T) {
	pg := integration.StartPostgres(t) // the source, stopped mid-test
	s := newSourceOn(t, pg.NewDatabase(t))
	tdb := integration.NewDatabase(t) // the target, in the shared container
	tconn := tdb.Connect(t)
	ctx := t.Context()
	if _, err := migrations.Apply(ctx, tconn); err != nil {
		t.Fatal(err)
	}
	ai := newFakeAI(t)
	ai.Set(2*time.Millisecond, nil)
	s.model(t, "vision", ai, fmt.Sprintf(`{"max_concurrency": %d}`, faultConcurrency))
	s.rule(t, "caption", "vision", "public.captions", "caption")
	cfg := s.config(t)
	cfg.TargetDSN = tdb.DSN()
	// A small byte budget: results waiting in the lane hold it, so the
	// engine stops reading after ~100 of them.
	cfg.Limits.ByteBudget = 2 << 20
	s.start(t, cfg)

	want := map[int]string{}
	insertRows(t, s, 1, 51, 10, want)
	s.sync(t, 30*time.Second)
	assertCaptions(t, captions(t, tconn), want)

	// Refuse writes: new sessions of the target database are read-only, and
	// the bridge's sessions are ended so that it reconnects into one.
	shared := tdb.Postgres()
	terminate := func() {
		t.Helper()
		if err := shared.Exec(ctx, "postgres", `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, tdb.Name); err != nil {
			t.Fatal(err)
		}
	}
	if err := shared.Exec(ctx, "postgres", "ALTER DATABASE "+pgx.Identifier{tdb.Name}.Sanitize()+" SET default_transaction_read_only = on"); err != nil {
		t.Fatal(err)
	}
	terminate()
	refused := time.Now()

	// A backlog larger than the byte budget lets the lane hold: the engine
	// stops calling, and the stream blocks.
	const total = 700
	insertEach(t, s, 51, total+1, want)
	var stalled int
	last, stable := -1, 0
	integration.WaitFor(t, 60*time.Second, "the engine to back up (requests stalled)", func() bool {
		n := ai.Count()
		if n == last {
			stable++
		} else {
			last, stable = n, 0
		}
		stalled = n
		return stable >= 20 // 1s without a new request
	})
	if stalled >= total {
		t.Fatalf("all %d rows were requested while the target refused writes: the stream did not back up, the test does not test the blocked stream", stalled)
	}
	t.Logf("backed up with %d of %d rows requested, %s after the target refused writes", stalled, total, time.Since(refused).Round(time.Millisecond))

	// A fast shutdown of the source must not wait for the blocked bridge.
	t0 := time.Now()
	stopCtx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	if err := pg.Stop(stopCtx); err != nil {
		t.Fatalf("fast shutdown of the source while the bridge is blocked on the target: %v", err)
	}
	stopped := time.Since(t0)
	if err := pg.Start(ctx); err != nil {
		t.Fatal(err)
	}
	s.reconnect(t)
	insertRows(t, s, total+1, total+21, 10, want)

	// The target takes writes again. A session keeps the
	// default_transaction_read_only it started with: the writer must open a
	// fresh one after a failed write, nobody terminates its session here.
	if err := shared.Exec(ctx, "postgres", "ALTER DATABASE "+pgx.Identifier{tdb.Name}.Sanitize()+" RESET default_transaction_read_only"); err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	tconn = tdb.Connect(t)
	back := s.waitStreamingAgain(t, 60*time.Second)
	s.sync(t, 90*time.Second)
	applied := time.Since(t1)

	assertCaptions(t, captions(t, tconn), want)
	if n := queryInt(t, tconn, "SELECT count(*) FROM pgimageai.errors"); n != 0 {
		t.Errorf("%d errors rows", n)
	}
	assertCallBound(t, ai, 1, total+21, faultConcurrency, "rows plus the calls in flight at the shutdown")
	t.Logf("source fast shutdown took %s with the bridge blocked; after the target took writes again: stream back in %s, backlog of %d rows applied in %s (writes refused for %s in all)",
		stopped.Round(time.Millisecond), back.Round(time.Millisecond), total+20-50, applied.Round(time.Millisecond), t1.Sub(refused).Round(time.Millisecond))
}
