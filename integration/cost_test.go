package integration_test

import (
	"bytes"
	"image"
	"image/png"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/integration"
)

// captionedThenKilled captions rows 1..n (inserted in transactions of per)
// through `pgimageai run`, then SIGKILLs it: what follows starts with an
// empty cache. It returns each row's caption, and the provider, which
// answered once per row.
func captionedThenKilled(t *testing.T, n, per int) (*source, *fakeAI, map[int]string) {
	t.Helper()
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{"max_concurrency": 16}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	p := s.runProcess(t)
	want := map[int]string{}
	insertRows(t, s, 1, n+1, per, want)
	s.sync(t, 120*time.Second)
	assertCaptions(t, captions(t, s.conn), want)
	if err := p.signal(t, syscall.SIGKILL); err == nil {
		t.Fatal("pgimageai exited cleanly on SIGKILL")
	}
	if paid := ai.Count(); paid != n {
		t.Fatalf("%d requests for %d rows", paid, n)
	}
	return s, ai, want
}

// TestNeverPayTwice: 1,000 rows are captioned; after a SIGKILL
// and a restart with an empty cache, an update of every row's note and a
// move of every key make zero calls, and so does the full backfill of the
// unchanged rows after recover-slot — the stored input of each result says
// nothing changed.
func TestNeverPayTwice(t *testing.T) {
	s, ai, want := captionedThenKilled(t, 1000, 100)
	paid := ai.Count()

	p2 := s.runProcess(t) // a new process: nothing in its cache
	s.exec(t, "UPDATE public.photos SET note = 'edited'")
	s.sync(t, 120*time.Second)
	if n := ai.Count() - paid; n != 0 {
		t.Errorf("%d requests after a note-only update of every row, want 0", n)
	}
	s.exec(t, "UPDATE public.photos SET id = id + 100000")
	s.sync(t, 120*time.Second)
	if n := ai.Count() - paid; n != 0 {
		t.Errorf("%d requests after every key moved, want 0", n)
	}
	moved := map[int]string{}
	for id, c := range want {
		moved[id+100000] = c
	}
	assertCaptions(t, captions(t, s.conn), moved)
	paid = ai.Count()
	if err := p2.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v", err)
	}

	runCLI(t, s, "recover-slot", "--force", "--publication", s.slot)
	s.runProcess(t)
	integration.WaitFor(t, 120*time.Second, "the backfill after recover-slot", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.backfills WHERE rule = 'caption' AND state = 'done' AND rows_done = 1000") == 1
	})
	s.sync(t, 60*time.Second)
	if n := ai.Count() - paid; n != 0 {
		t.Errorf("%d requests for the backfill of 1000 unchanged rows, want 0", n)
	}
	assertCaptions(t, captions(t, s.conn), moved)
	// A changed image still costs its call, and a row whose result was
	// deleted by hand is computed again.
	s.exec(t, "UPDATE public.photos SET img = $1 WHERE id = 100001", pngImage(t, 5000))
	s.exec(t, "DELETE FROM public.captions WHERE id = 100002")
	s.exec(t, "UPDATE public.photos SET note = 'again' WHERE id = 100002")
	s.sync(t, 60*time.Second)
	if n := ai.Count() - paid; n != 2 {
		t.Errorf("%d requests for a new image and a deleted result, want 2", n)
	}
	if got := captions(t, s.conn); got[100002] != moved[100002] || got[100001] == moved[100001] {
		t.Errorf("after a new image and a deleted result: %q and %q", got[100001], got[100002])
	}
}

// TestBudgets: a budget of 5 calls a day for 10 new rows gives 5 results, 5
// budget_exhausted rows and no extra call; the next UTC day retries them by
// itself; rows refused again are processed at once by pgimageai retry after
// the budget is raised.
func TestBudgets(t *testing.T) {
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{"max_calls_per_day": 5}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	var mu sync.Mutex
	clock := time.Now().UTC()
	cfg := s.config(t)
	cfg.Timing.RecheckInterval = 200 * time.Millisecond
	cfg.Timing.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	_, stop := s.start(t, cfg)
	want := map[int]string{}
	insertRows(t, s, 1, 11, 10, want)
	s.sync(t, 30*time.Second)
	exhausted := func() int {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE reason = 'budget_exhausted' AND resolved_at IS NULL")
	}
	results := func() int {
		return queryInt(t, s.conn, "SELECT count(*) FROM public.captions WHERE caption IS NOT NULL")
	}
	if ai.Count() != 5 || results() != 5 || exhausted() != 5 {
		t.Fatalf("budget of 5: %d calls, %d results, %d budget_exhausted rows; want 5, 5, 5", ai.Count(), results(), exhausted())
	}
	// The next UTC day: the refused rows are retried by themselves.
	mu.Lock()
	clock = clock.Add(24 * time.Hour)
	mu.Unlock()
	integration.WaitFor(t, 30*time.Second, "the refused rows retried on the new day", func() bool { return results() == 10 })
	if ai.Count() != 10 || exhausted() != 0 {
		t.Errorf("after the new day: %d calls, %d budget_exhausted rows; want 10, 0", ai.Count(), exhausted())
	}
	// That day's budget is spent too: 3 more rows are refused, then
	// processed at once by a retry once the budget is raised.
	insertRows(t, s, 11, 14, 3, want)
	s.sync(t, 30*time.Second)
	if ai.Count() != 10 || exhausted() != 3 {
		t.Fatalf("spent budget: %d calls, %d budget_exhausted rows; want 10, 3", ai.Count(), exhausted())
	}
	s.exec(t, `UPDATE pgimageai.models SET options = '{"max_calls_per_day": 20}' WHERE name = 'vision'`)
	runCLI(t, s, "retry", "--reason", "budget_exhausted")
	integration.WaitFor(t, 30*time.Second, "the retry after raising the budget", func() bool { return results() == 13 })
	if ai.Count() != 13 || exhausted() != 0 {
		t.Errorf("after the retry: %d calls, %d budget_exhausted rows; want 13, 0", ai.Count(), exhausted())
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	assertCaptions(t, captions(t, s.conn), want)
}

// TestEstimate: pgimageai estimate on a table of known images prints the
// tokens that OpenAI's documented rule for gpt-4o gives at detail high
// (1024x1024: 765; 2048x4096: 1105) and low (85 an image), and the money at
// the model's prices; NULL and unknown images cost no call.
func TestEstimate(t *testing.T) {
	s := newSource(t)
	encode := func(w, h int) []byte {
		var b bytes.Buffer
		if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	square, tall := encode(1024, 1024), encode(2048, 4096)
	s.exec(t, `INSERT INTO public.photos (id, img) VALUES (1, $1), (2, $1), (3, $1), (4, $2), (5, NULL), (6, 'not an image')`, square, tall)
	for _, tc := range []struct {
		detail   string
		batchAPI bool
		want     string
	}{
		{"high", false, "Backfill: 4 calls, 3400 input tokens, 1200 output tokens (max_tokens, an upper bound), cost 0.02050 (at the model's"},
		{"low", false, "Backfill: 4 calls, 340 input tokens, 1200 output tokens (max_tokens, an upper bound), cost 0.01285 (at the model's"},
		// A batch_api model's backfill goes through the Batch API, at half.
		{"high", true, "Backfill: 4 calls, 3400 input tokens, 1200 output tokens (max_tokens, an upper bound), cost 0.01025 (half the model's price_per_1m_* options: the Batch API)"},
	} {
		s.exec(t, `DELETE FROM pgimageai.rules`)
		s.exec(t, `DELETE FROM pgimageai.models`)
		s.exec(t, `INSERT INTO pgimageai.models (name, provider, base_url, model, options) VALUES ('vision', 'openai', 'http://127.0.0.1:9/v1', 'gpt-4o',
  jsonb_build_object('detail', $1::text, 'max_tokens', 300, 'price_per_1m_input_tokens', 2.5, 'price_per_1m_output_tokens', 10, 'batch_api', $2::boolean))`, tc.detail, tc.batchAPI)
		s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column, enabled)
VALUES ('caption', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'vision', 'Describe', 'public.captions', 'caption', false)
ON CONFLICT (name) DO NOTHING`)
		out := runCLI(t, s, "estimate", "--rule", "caption")
		for _, want := range []string{"Source: 6 rows, all read, 5 with an image", "1 images have no known format",
			"OpenAI's", "detail " + tc.detail, tc.want} {
			if !strings.Contains(out, want) {
				t.Errorf("detail %s: estimate lacks %q:\n%s", tc.detail, want, out)
			}
		}
	}
}
