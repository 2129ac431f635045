package integration_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/integration"
)

// TestRateLimitNeverFailsARow: a provider that enforces 600 requests a
// minute the way OpenAI does (headers on every answer, 429
// rate_limit_exceeded past the limit, enforced over a fifth of a second),
// and a model configured as users configure one — max_concurrency 64, no
// requests_per_minute — with max_retries 0, so that a 429 that spent a retry
// would fail its row. Every row gets its caption, no errors row is written,
// the pace follows the headers (few 429s after the first burst), status
// stores the pace and what set it, and the log says "rate-limited" once.
// With and without Retry-After on the 429s.
func TestRateLimitNeverFailsARow(t *testing.T) {
	for _, retryAfter := range []bool{false, true} {
		name := "no Retry-After"
		if retryAfter {
			name = "Retry-After"
		}
		t.Run(name, func(t *testing.T) {
			s := newSource(t)
			ai := newFakeAI(t)
			lim := &openAILimits{rpm: 600, burst: 0.2, retryAfter: retryAfter}
			lim.install(ai)
			s.model(t, "vision", ai, `{"max_concurrency":64,"max_retries":0}`)
			s.rule(t, "caption", "vision", "public.captions", "caption")
			cfg := s.config(t)
			logs := captureLogs(t, &cfg)
			cfg.Timing.PaceReport = 200 * time.Millisecond
			_, stop := s.start(t, cfg)
			const rows = 40
			for i := range rows {
				s.exec(t, "INSERT INTO public.photos (id, img) VALUES ($1, $2)", i, pngImage(t, i))
			}
			s.sync(t, 90*time.Second)
			if n := queryInt(t, s.conn, "SELECT count(caption) FROM public.captions"); n != rows {
				t.Errorf("%d captions, want %d", n, rows)
			}
			if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors"); n != 0 {
				t.Errorf("%d errors rows, want none: a 429 never fails a row", n)
			}
			answered, limited, rate, allowed := lim.counts()
			t.Logf("answered %d, 429 %d, %.1f answers/s of %.1f allowed", answered, limited, rate, allowed)
			if limited == 0 {
				t.Fatal("no request met a 429: the test did not exercise the limit")
			}
			// Without a pace, 64 requests at once against 2 at a time give
			// hundreds of 429s; with it, those of the first round trips.
			if limited > rows/4 {
				t.Errorf("%d requests answered 429 for %d rows: the pace did not follow the headers", limited, rows)
			}
			integration.WaitFor(t, 10*time.Second, "the model's pacing in pgimageai.model_pace", func() bool {
				var pace string
				var rateLimited bool
				err := s.conn.QueryRow(context.Background(), "SELECT pace, rate_limited FROM pgimageai.model_pace WHERE slot = $1 AND model = 'vision'",
					s.slot).Scan(&pace, &rateLimited)
				return err == nil && strings.Contains(pace, "req/s, by x-ratelimit") && rateLimited
			})
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(logs.String(), "model rate-limited"); n != 1 {
				t.Errorf("%d log lines saying the model is rate-limited, want 1 (not one per row)", n)
			}
		})
	}
}

// TestQuotaExhaustedFailsTheRow: OpenAI's insufficient_quota 429 ("You
// exceeded your current quota") is the one 429 that fails a row, with the
// provider's message, since waiting does not cure it.
func TestQuotaExhaustedFailsTheRow(t *testing.T) {
	s := newSource(t)
	ai := newFakeAI(t)
	ai.mu.Lock()
	ai.hook = func(w http.ResponseWriter, _ *http.Request, _ aiRequest) bool {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write([]byte(`{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`))
		return true
	}
	ai.mu.Unlock()
	s.model(t, "vision", ai, `{}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	s.start(t, s.config(t))
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (1, $1)", pngImage(t, 1))
	s.sync(t, 30*time.Second)
	var reason, detail string
	if err := s.conn.QueryRow(context.Background(), "SELECT reason, detail FROM pgimageai.errors WHERE rule = 'caption'").Scan(&reason, &detail); err != nil {
		t.Fatal(err)
	}
	if reason != "provider_error" || !strings.Contains(detail, "HTTP 429: You exceeded your current quota") {
		t.Fatalf("errors row %s %q, want provider_error with the provider's message", reason, detail)
	}
	if n := ai.Count(); n != 1 {
		t.Fatalf("%d requests, want 1: a spent quota is not asked again", n)
	}
}

// TestConcurrencyComesDownUnderQueueing: a server that serves 2 requests at
// once and queues the rest (latency grows with the queue), and a model whose
// max_concurrency is 32: the bridge's concurrency comes down toward what the
// server serves, every row still gets its result.
func TestConcurrencyComesDownUnderQueueing(t *testing.T) {
	s := newSource(t)
	ai := newFakeAI(t)
	slots := make(chan struct{}, 2)
	ai.mu.Lock()
	ai.hook = func(http.ResponseWriter, *http.Request, aiRequest) bool {
		slots <- struct{}{}
		time.Sleep(30 * time.Millisecond)
		<-slots
		return false
	}
	ai.mu.Unlock()
	s.model(t, "vision", ai, `{"max_concurrency":32}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	cfg := s.config(t)
	cfg.Timing.PaceReport = 200 * time.Millisecond
	s.start(t, cfg)
	// Rows in batches of 100 until the limit is down, at most 8 batches: on a
	// loaded machine the first round trips can already be queued, and the
	// limit then comes down at the next probe of a lower concurrency.
	rows, limit := 0, 0
	for batch := 0; batch < 8; batch++ {
		s.exec(t, `INSERT INTO public.photos (id, img) SELECT i, $1::bytea || int4send(i) FROM generate_series($2::int, $3::int) i`, pngImage(t, 1), rows+1, rows+100)
		rows += 100
		s.sync(t, 90*time.Second)
		time.Sleep(400 * time.Millisecond) // one more report
		limit = queryInt(t, s.conn, "SELECT concurrency FROM pgimageai.model_pace WHERE slot = $1 AND model = 'vision'", s.slot)
		t.Logf("concurrency limit after %d rows: %d of 32", rows, limit)
		if limit <= 12 {
			break
		}
	}
	if n := queryInt(t, s.conn, "SELECT count(caption) FROM public.captions"); n != rows {
		t.Errorf("%d captions, want %d", n, rows)
	}
	if limit > 12 {
		t.Errorf("concurrency limit %d against a server of 2 slots after %d rows, want it down from 32 (≤ 12)", limit, rows)
	}
}
