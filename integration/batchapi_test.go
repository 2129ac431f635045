package integration_test

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/state"
)

// TestBatchAPIBackfill: the backfill of 1,000 rows of a model
// with batch_api: true goes through the Batch API fake as one batch; while
// it is polled, a changed row is computed by the stream (a synchronous
// call) and `pgimageai run` is killed with SIGKILL; the new process resumes
// polling the recorded batch — no second upload or submission — and writes
// 997 results and 3 errors rows (the 3 lines that failed), the changed row
// keeping its streamed value. Usage counts the batch's answers and tokens.
func TestBatchAPIBackfill(t *testing.T) {
	s := newSource(t)
	ai := newFakeBatchAI(t)
	want := map[int]string{}
	insertRows(t, s, 1, 1001, 100, want)
	failed := map[int]bool{100: true, 500: true, 900: true}
	ai.failIDs = failed
	s.model(t, "vision", ai.fakeAI, `{"batch_api": true, "batch_poll_interval": "100ms"}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")

	p1 := s.runProcess(t)
	integration.WaitFor(t, 120*time.Second, "the batch to be polled", func() bool { _, _, polls := ai.counts(); return polls >= 3 })
	// A row changed while the batch runs: the stream computes it at once,
	// synchronously, and the batch's older answer must not replace it.
	img := pngImage(t, 5007)
	s.exec(t, "UPDATE public.photos SET img = $1 WHERE id = 7", img)
	want[7] = captionOf(magic.DataURL(magic.PNG, img))
	s.sync(t, 60*time.Second)
	if got := captions(t, s.conn)[7]; got != want[7] {
		t.Fatalf("row 7 changed during the batch: caption %q, want %q (streamed)", got, want[7])
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.captions"); n != 1 {
		t.Fatalf("%d results before the batch finished, want only the streamed one", n)
	}
	if n := queryInt(t, s.conn, `SELECT count(*) FROM pgimageai.backfill_batches WHERE rule = 'caption' AND batch_id = 'batch_1'
  AND requests = 1000 AND status = 'in_progress' AND NOT downloaded AND final`); n != 1 {
		t.Fatalf("backfill_batches does not record the running batch (%d rows)", n)
	}
	p1.signal(t, syscall.SIGKILL)

	ai.setRelease()
	s.runProcess(t)
	backfillDone(t, s, "caption", 120*time.Second)

	uploads, creates, _ := ai.counts()
	if uploads != 1 || creates != 1 {
		t.Errorf("%d uploads and %d batches created, want 1 and 1: the restart must resume polling", uploads, creates)
	}
	if n := ai.Count(); n != 1 {
		t.Errorf("%d synchronous calls, want 1 (the row changed during the batch)", n)
	}
	got := captions(t, s.conn)
	results := 0
	for id, c := range got {
		switch {
		case failed[id]:
			if c != "<NULL>" {
				t.Errorf("row %d failed in the batch but has %q", id, c)
			}
		case c == want[id]:
			results++
		default:
			t.Errorf("row %d: %q, want %q", id, c, want[id])
		}
	}
	if len(got) != 1000 || results != 997 {
		t.Errorf("%d target rows, %d results; want 1000 and 997", len(got), results)
	}
	errs := openErrors(t, s.conn)
	if len(errs) != 3 {
		t.Errorf("open errors %v, want 3", errs)
	}
	for id := range failed {
		if errs[id] != "provider_error" {
			t.Errorf("row %d: open error %q, want provider_error", id, errs[id])
		}
	}
	if n := queryInt(t, s.conn, `SELECT count(*) FROM pgimageai.errors WHERE detail LIKE '%HTTP 400: Invalid image in row%'`); n != 3 {
		t.Errorf("%d errors rows with the line's status and message, want 3", n)
	}
	// 996 batch answers and the one synchronous call, 11 + 5 tokens each.
	if calls, tokens := queryInt(t, s.conn, "SELECT coalesce(sum(calls), 0) FROM pgimageai.usage WHERE rule = 'caption'"),
		queryInt(t, s.conn, "SELECT coalesce(sum(prompt_tokens + completion_tokens), 0) FROM pgimageai.usage WHERE rule = 'caption'"); calls != 997 || tokens != 997*16 {
		t.Errorf("usage: %d calls, %d tokens; want 997 and %d", calls, tokens, 997*16)
	}
	if n := queryInt(t, s.conn, `SELECT count(*) FROM pgimageai.backfill_batches WHERE rule = 'caption' AND status = 'completed' AND downloaded
  AND completed = 997 AND failed = 3 AND output_file_id IS NOT NULL AND error_file_id IS NOT NULL`); n != 1 {
		t.Errorf("backfill_batches does not record the completed batch")
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.batch_answers"); n != 0 {
		t.Errorf("%d batch answers left after the backfill", n)
	}
	if n := queryInt(t, s.conn, "SELECT rows_done::int FROM pgimageai.backfills WHERE rule = 'caption'"); n != 1000 {
		t.Errorf("backfill rows_done = %d, want 1000", n)
	}
	// The input file (the images), the output and the error file are
	// deleted at the provider once the answers are stored.
	ai.mu.Lock()
	deleted := map[string]bool{}
	for _, id := range ai.deleted {
		deleted[id] = true
	}
	inputsLeft := 0
	for id := range ai.inputs {
		if !deleted[id] {
			inputsLeft++
		}
	}
	left := inputsLeft + len(ai.content)
	ai.mu.Unlock()
	if len(deleted) != 3 || left != 0 {
		t.Errorf("files deleted at the provider: %v, %d left; want the input, output and error file, none left", deleted, left)
	}
}

// TestBatchAPIExpired: 100 rows with batch_max_requests 40 go as three
// batches of 40, 40 and 20 rows, in key order; the second expires with 25
// of its 40 requests done. Those 25 answers are used; the 15 requests it
// never ran get the synchronous call (the choice the README documents): the
// target equals what the synchronous API alone gives, and nothing is
// submitted twice.
func TestBatchAPIExpired(t *testing.T) {
	s := newSource(t)
	ai := newFakeBatchAI(t)
	ai.release = true
	ai.expire = func(n int) int {
		if n == 2 {
			return 25
		}
		return -1
	}
	want := map[int]string{}
	insertRows(t, s, 1, 101, 50, want)
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (101, NULL), (102, 'not an image')")
	want[101], want[102] = "<NULL>", "<NULL>"
	s.model(t, "vision", ai.fakeAI, `{"batch_api": true, "batch_poll_interval": "50ms", "batch_max_requests": 40}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	_, stop := s.start(t, s.config(t))
	backfillDone(t, s, "caption", 120*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	uploads, creates, _ := ai.counts()
	if uploads != 3 || creates != 3 {
		t.Errorf("%d uploads, %d batches; want 3 and 3", uploads, creates)
	}
	lines := ai.linesOf()
	var all []int
	for i, ids := range lines {
		if wantN := []int{40, 40, 20}[min(i, 2)]; len(ids) != wantN {
			t.Errorf("batch %d has %d requests, want %d", i+1, len(ids), wantN)
		}
		all = append(all, ids...)
	}
	if !sort.IntsAreSorted(all) || len(all) != 100 || all[0] != 1 || all[99] != 100 {
		t.Errorf("the batches do not hold rows 1..100 once each in key order: %v", all)
	}
	// The 15 requests of batch 2 that never ran: rows 66..80.
	sync := map[int]bool{}
	for _, r := range ai.Requests() {
		for id := 66; id <= 80; id++ {
			if r.DataURL == magic.DataURL(magic.PNG, pngImage(t, id)) {
				sync[id] = true
			}
		}
	}
	if n := ai.Count(); n != 15 || len(sync) != 15 {
		t.Errorf("%d synchronous calls (%d of rows 66..80), want 15: the expired batch's unrun requests", n, len(sync))
	}
	assertCaptions(t, captions(t, s.conn), want)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE resolved_at IS NULL AND reason = 'unknown_format'"); n != 1 {
		t.Errorf("%d unknown_format errors rows, want 1 (row 102, never sent)", n)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.backfill_batches WHERE rule = 'caption' AND status = 'expired' AND seq = 2 AND completed = 25"); n != 1 {
		t.Errorf("backfill_batches does not record the expired batch")
	}
	if n := queryInt(t, s.conn, "SELECT coalesce(sum(calls), 0) FROM pgimageai.usage WHERE rule = 'caption'"); n != 100 {
		t.Errorf("usage counts %d calls, want 100 (85 batch answers, 15 synchronous)", n)
	}
}

// TestBatchAPICrashWhileCreating: `pgimageai run` is SIGKILLed while the
// provider creates the batch (it made the batch but the answer never came),
// so the batch's ID was never recorded; the new process finds the batch by
// its input file and polls it: one batch in all, every row answered by it.
func TestBatchAPICrashWhileCreating(t *testing.T) {
	s := newSource(t)
	ai := newFakeBatchAI(t)
	ai.release, ai.holdCreate = true, true
	want := map[int]string{}
	insertRows(t, s, 1, 51, 50, want)
	s.model(t, "vision", ai.fakeAI, `{"batch_api": true, "batch_poll_interval": "50ms"}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	p1 := s.runProcess(t)
	integration.WaitFor(t, 60*time.Second, "the batch to be created", func() bool { _, creates, _ := ai.counts(); return creates == 1 })
	p1.signal(t, syscall.SIGKILL)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.backfill_batches WHERE batch_id IS NULL AND status = 'uploaded' AND input_file_id = 'file-in-1'"); n != 1 {
		t.Fatalf("the uploaded batch is not recorded without its ID (%d rows)", n)
	}
	ai.setHoldCreate(false)
	s.runProcess(t)
	backfillDone(t, s, "caption", 120*time.Second)
	if uploads, creates, _ := ai.counts(); uploads != 1 || creates != 1 {
		t.Errorf("%d uploads, %d batches created; want 1 and 1", uploads, creates)
	}
	if n := ai.Count(); n != 0 {
		t.Errorf("%d synchronous calls, want 0", n)
	}
	assertCaptions(t, captions(t, s.conn), want)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.backfill_batches WHERE batch_id = 'batch_1' AND status = 'completed' AND downloaded"); n != 1 {
		t.Errorf("backfill_batches does not record batch_1 as found and completed")
	}
}

// TestBatchAPIRefused: a provider that refuses the upload for good (403)
// does not stall the backfill: its rows get synchronous calls.
func TestBatchAPIRefused(t *testing.T) {
	s := newSource(t)
	ai := newFakeBatchAI(t)
	ai.refuseUploads = true
	want := map[int]string{}
	insertRows(t, s, 1, 21, 20, want)
	s.model(t, "vision", ai.fakeAI, `{"batch_api": true}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	_, stop := s.start(t, s.config(t))
	backfillDone(t, s, "caption", 60*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if uploads, creates, _ := ai.counts(); uploads != 0 || creates != 0 || ai.Count() != 20 {
		t.Errorf("%d uploads, %d batches, %d synchronous calls; want 0, 0, 20", uploads, creates, ai.Count())
	}
	assertCaptions(t, captions(t, s.conn), want)
}

// TestLoadAnswersBounded: a page holds its rows' batch answers up to a
// bound of bytes (at least one); the rows after are not covered, and their
// page ends before them.
func TestLoadAnswersBounded(t *testing.T) {
	s := newSource(t)
	s.exec(t, `INSERT INTO pgimageai.batch_answers (rule, source_key, input_key, answer)
SELECT 'r', jsonb_build_object('id', i), '\x00', repeat('x', 100) FROM generate_series(1, 5) i WHERE i <> 2`)
	keys := []string{`{"id": 1}`, `{"id": 2}`, `{"id": 3}`, `{"id": 4}`, `{"id": 5}`}
	for _, tc := range []struct {
		max, covered int
	}{
		{1000, 5}, // all held
		{250, 3},  // 1 and 3 (2 has none); 4 would pass 250
		{50, 2},   // the first always, then 3 would pass
	} {
		out, covered, err := state.LoadAnswers(context.Background(), s.conn, "r", keys, tc.max)
		if err != nil {
			t.Fatal(err)
		}
		if covered != tc.covered || len(out) != covered {
			t.Errorf("bound %d: %d keys covered (%d answers), want %d", tc.max, covered, len(out), tc.covered)
			continue
		}
		for i, a := range out {
			if (a == nil) != (i == 1) {
				t.Errorf("bound %d: key %d answer %v", tc.max, i+1, a)
			}
		}
	}

	// The answers past the bound are not sent: ten answers of 1 MiB
	// under a bound of 2 MiB bring about 2 MiB over the connection, not 10.
	s.exec(t, `INSERT INTO pgimageai.batch_answers (rule, source_key, input_key, answer)
SELECT 'big', jsonb_build_object('id', i), '\x00', repeat('x', 1 << 20) FROM generate_series(1, 10) i`)
	cfg, err := pgx.ParseConfig(s.db.DSN())
	if err != nil {
		t.Fatal(err)
	}
	var received atomic.Int64
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		return countingConn{Conn: c, n: &received}, err
	}
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	bigKeys := make([]string, 10)
	for i := range bigKeys {
		bigKeys[i] = fmt.Sprintf(`{"id": %d}`, i+1)
	}
	before := received.Load()
	out, covered, err := state.LoadAnswers(context.Background(), conn, "big", bigKeys, 2<<20)
	if err != nil || covered != 2 || len(out) != 2 || out[0] == nil || out[1] == nil || len(*out[1].Answer) != 1<<20 {
		t.Fatalf("big answers: %d covered (%d answers), err %v; want 2 of 1 MiB", covered, len(out), err)
	}
	if n := received.Load() - before; n > 3<<20 {
		t.Errorf("LoadAnswers received %d bytes for 2 answers of 1 MiB held", n)
	}
}

// countingConn counts the bytes read from a connection.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// backfillDone waits until rule's backfill is done and the bridge has
// applied the stream up to now.
func backfillDone(t testing.TB, s *source, rule string, timeout time.Duration) {
	t.Helper()
	integration.WaitFor(t, timeout, "the backfill of "+rule, func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.backfills WHERE rule = $1 AND state = 'done'", rule) == 1
	})
	s.sync(t, 60*time.Second)
}

// TestBatchAPIPageBoundedByAnswers: a page holds its rows' batch answers up
// to 8 MiB of text; the rows whose answers it could not hold go to the next
// page, with their answers — none is called synchronously (60 answers of
// 200 KB are 12 MB: two pages at least).
func TestBatchAPIPageBoundedByAnswers(t *testing.T) {
	s := newSource(t)
	ai := newFakeBatchAI(t)
	ai.release = true
	ai.pad = 200 << 10
	want := map[int]string{}
	insertRows(t, s, 1, 61, 30, want)
	for id := range want {
		want[id] += strings.Repeat("x", ai.pad)
	}
	s.model(t, "vision", ai.fakeAI, `{"batch_api": true, "batch_poll_interval": "50ms"}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	_, stop := s.start(t, s.config(t))
	backfillDone(t, s, "caption", 120*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n := ai.Count(); n != 0 {
		t.Errorf("%d synchronous calls, want 0: every row has its batch answer", n)
	}
	got := captions(t, s.conn)
	for id, w := range want {
		if got[id] != w { // not printed: 200 KB each
			t.Errorf("row %d: a caption of %d bytes, want the batch's answer of %d", id, len(got[id]), len(w))
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d captions, want %d", len(got), len(want))
	}
}
