package integration_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/metrics"
	"github.com/pgimageai/pgimageai/state"
)

// TestErrorCapEndToEnd: with a cap of 5 open errors rows on a rule, 20 rows
// with empty images leave 5 open errors rows and 15 failures counted as not
// recorded (pgimageai.error_counts and the metric), every result NULL; a
// recorded row that fails again updates its row at the cap; pgimageai retry
// reprocesses the recorded rows; once the images are fixed, all 20 results
// arrive and the errors resolve. Then the retention deletes the retry
// request once the slot has passed it.
func TestErrorCapEndToEnd(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	ctx := context.Background()
	s := newSource(t)
	ai := newFakeAI(t)
	ai.Set(0, func(r aiRequest) (int, string) { return http.StatusOK, captionOf(r.DataURL) })
	s.model(t, "vision", ai, `{}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	s.exec(t, "INSERT INTO pgimageai.error_caps (rule, max_open) VALUES ('caption', 5)")
	m := metrics.New()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	cfg := s.config(t)
	cfg.Metrics = m
	_, stop := s.start(t, cfg)

	s.exec(t, `INSERT INTO public.photos (id, img) SELECT i, '\x'::bytea FROM generate_series(1, 20) i`)
	s.sync(t, 30*time.Second)

	openRows := func() int {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE rule = 'caption' AND resolved_at IS NULL")
	}
	counts := func() (open, dropped int) {
		t.Helper()
		if err := s.conn.QueryRow(ctx, "SELECT open, dropped FROM pgimageai.error_counts WHERE rule = 'caption'").Scan(&open, &dropped); err != nil {
			t.Fatal(err)
		}
		return open, dropped
	}
	if n := openRows(); n != 5 {
		t.Errorf("%d open errors rows, want the cap, 5", n)
	}
	if open, dropped := counts(); open != 5 || dropped != 15 {
		t.Errorf("error_counts: open %d, dropped %d; want 5, 15", open, dropped)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.captions WHERE caption IS NULL"); n != 20 {
		t.Errorf("%d NULL captions, want 20", n)
	}
	got := scrape(t, srv.URL)
	for series, w := range map[string]float64{
		`pgimageai_errors_dropped_total{reason="empty_image",rule="caption"}`: 15,
		`pgimageai_errors_total{reason="empty_image"}`:                        5,
	} {
		if got[series] != w {
			t.Errorf("%s = %v, want %v", series, got[series], w)
		}
	}
	caps, err := state.DroppedErrors(ctx, s.conn) // what pgimageai status lists
	if err != nil {
		t.Fatal(err)
	}
	if len(caps) != 1 || caps[0].Rule != "caption" || caps[0].Dropped != 15 || caps[0].Open != 5 || caps[0].MaxOpen == nil || *caps[0].MaxOpen != 5 {
		t.Errorf("status lists %+v, want caption: 5 open, cap 5, 15 not recorded", caps)
	}

	// At the cap, a recorded row that fails again has its row updated.
	recorded := queryInt(t, s.conn, "SELECT min((source_key->>'id')::int) FROM pgimageai.errors WHERE rule = 'caption' AND resolved_at IS NULL")
	s.exec(t, "UPDATE public.photos SET img = 'not an image'::bytea WHERE id = $1", recorded)
	s.sync(t, 30*time.Second)
	if n := queryInt(t, s.conn, `SELECT attempts FROM pgimageai.errors WHERE rule = 'caption' AND resolved_at IS NULL
  AND source_key = jsonb_build_object('id', $1::int) AND reason = 'unknown_format'`, recorded); n != 2 {
		t.Errorf("attempts of the recorded row that failed again = %d, want 2", n)
	}

	// pgimageai retry reprocesses the recorded rows (still bad: attempts + 1).
	if _, err := state.RequestRetry(ctx, s.conn, "caption", ""); err != nil {
		t.Fatal(err)
	}
	s.sync(t, 30*time.Second)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE rule = 'caption' AND resolved_at IS NULL AND attempts >= 2"); n != 5 {
		t.Errorf("%d open rows retried, want 5", n)
	}
	if open, dropped := counts(); open != 5 || dropped != 15 {
		t.Errorf("after the retry error_counts: open %d, dropped %d; want 5, 15", open, dropped)
	}

	// Fixed images: every result arrives, every error resolves.
	for id := 1; id <= 20; id++ {
		s.exec(t, "UPDATE public.photos SET img = $2 WHERE id = $1", id, pngImage(t, id))
	}
	s.sync(t, 30*time.Second)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.captions WHERE caption LIKE 'caption:%'"); n != 20 {
		t.Errorf("%d captions after the fix, want 20", n)
	}
	if n := openRows(); n != 0 {
		t.Errorf("%d open errors rows after the fix, want 0", n)
	}
	if open, _ := counts(); open != 0 {
		t.Errorf("error_counts.open = %d after the fix, want 0", open)
	}

	// The retry request: noted by one pass, deleted by the next once the
	// slot passed it.
	s.exec(t, "UPDATE pgimageai.retention SET keep = '0' WHERE what = 'retry_requests'")
	if n, err := state.PruneRetryRequests(ctx, s.conn, s.slot); err != nil || n != 0 {
		t.Fatalf("first pass deleted %d, %v; want 0", n, err)
	}
	s.sync(t, 30*time.Second)
	if n, err := state.PruneRetryRequests(ctx, s.conn, s.slot); err != nil || n != 1 {
		t.Fatalf("second pass deleted %d, %v; want 1", n, err)
	}
	s.sync(t, 30*time.Second) // the bridge reads the UPDATE and DELETE and goes on
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
}
