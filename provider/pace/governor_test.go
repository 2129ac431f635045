package pace

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestAcquireBoundsInFlight(t *testing.T) {
	g := New(Config{Ceiling: 4, Start: 3})
	var in, peak atomic.Int32
	var wg sync.WaitGroup
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, err := g.Acquire(context.Background(), 0)
			if err != nil {
				t.Error(err)
				return
			}
			n := in.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			time.Sleep(2 * time.Millisecond)
			in.Add(-1)
			tk.Done(Outcome{Status: 200})
		}()
	}
	wg.Wait()
	if p := peak.Load(); p < 3 || p > 4 {
		t.Fatalf("peak in flight %d, want the limit (3, or 4 once it grew) and never above the ceiling", p)
	}
}

func TestRetryAfterPausesTheModel(t *testing.T) {
	g := New(Config{Ceiling: 8})
	tk, err := g.Acquire(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	tk.Done(Outcome{Status: 429, Limited: true, Header: header("Retry-After", "0.3")})
	tk.Done(Outcome{Status: 200}) // a second Done does nothing
	var wg sync.WaitGroup
	for range 3 { // every request of the model waits, not only the one that met the 429
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, err := g.Acquire(context.Background(), 0)
			if err != nil {
				t.Error(err)
				return
			}
			if d := time.Since(t0); d < 290*time.Millisecond {
				t.Errorf("a request went after %s, inside the server's Retry-After of 300ms", d)
			}
			tk.Done(Outcome{Status: 200})
		}()
	}
	wg.Wait()
	s := g.Snapshot()
	if !s.RateLimited || s.Limited != 1 || s.Total429 != 1 || s.Waited < 800*time.Millisecond {
		t.Fatalf("snapshot %+v: want rate-limited, one 429, ≥ 0.9 s waited in all", s)
	}
}

func TestHeadersPaceRequests(t *testing.T) {
	g := New(Config{Ceiling: 64})
	tk, _ := g.Acquire(context.Background(), 0)
	// 600 a minute: one of them used, back within 100 ms: 10 requests/s.
	tk.Done(Outcome{Status: 200, Header: header("x-ratelimit-limit-requests", "600",
		"x-ratelimit-remaining-requests", "599", "x-ratelimit-reset-requests", "100ms")})
	s := g.Snapshot()
	if want := "9.7 of 10 req/s, by x-ratelimit"; s.Pace() != want {
		t.Fatalf("pace %q, want %q", s.Pace(), want)
	}
	t0 := time.Now()
	var at []time.Duration
	for range 20 {
		tk, err := g.Acquire(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		at = append(at, time.Since(t0))
		tk.Done(Outcome{Status: 200})
	}
	// The headers' pace may run 0.9 s ahead (OpenAI enforces per-minute
	// limits over a second): about 9 at once, then one every 1/9.7 s.
	if at[7] > 50*time.Millisecond {
		t.Errorf("the 8th request went after %s: no burst", at[7])
	}
	if at[19] < 1000*time.Millisecond {
		t.Fatalf("20 requests in %s: not paced at 9.7/s", at[19])
	}
}

func TestOperatorCeilingsPace(t *testing.T) {
	tests := []struct {
		name   string
		cfg    Config
		tokens int
		min    time.Duration // for 5 requests
		pace   string
	}{
		{name: "requests_per_minute", cfg: Config{Ceiling: 8, RequestsPerMinute: 600}, min: 400 * time.Millisecond, pace: "10 req/s, by requests_per_minute"},
		{name: "tokens_per_minute", cfg: Config{Ceiling: 8, TokensPerMinute: 60000}, tokens: 100, min: 400 * time.Millisecond, pace: "1000 tokens/s, by tokens_per_minute"},
		{name: "tokens not estimated are not paced", cfg: Config{Ceiling: 8, TokensPerMinute: 60}, tokens: 0, pace: "1 tokens/s, by tokens_per_minute"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := New(tt.cfg)
			t0 := time.Now()
			for range 5 {
				tk, err := g.Acquire(context.Background(), tt.tokens)
				if err != nil {
					t.Fatal(err)
				}
				tk.Done(Outcome{Status: 200})
			}
			if d := time.Since(t0); d < tt.min || (tt.min == 0 && d > 200*time.Millisecond) {
				t.Fatalf("5 requests in %s, want ≥ %s", d, tt.min)
			}
			if p := g.Snapshot().Pace(); p != tt.pace {
				t.Fatalf("pace %q, want %q", p, tt.pace)
			}
		})
	}
}

func TestAcquireCanceled(t *testing.T) {
	g := New(Config{Ceiling: 1, Start: 1})
	tk, _ := g.Acquire(context.Background(), 0)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := g.Acquire(ctx, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the context's", err)
	}
	tk.Done(Outcome{Status: 200})
	// Paused for a long time: a canceled wait gives its place back.
	tk, _ = g.Acquire(context.Background(), 0)
	tk.Done(Outcome{Status: 429, Limited: true, Header: header("Retry-After", "60")})
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if _, err := g.Acquire(ctx2, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v during a pause, want the context's", err)
	}
	if s := g.Snapshot(); s.InFlight != 0 || s.PausedFor < 59*time.Second {
		t.Fatalf("snapshot %+v: want nothing in flight and the pause kept", s)
	}
}

// TestBlind429sCutThePace: providers that document a 429 past their
// per-minute limits but no rate-limit headers — Voyage
// (docs.voyageai.com/docs/rate-limits), Cohere (docs.cohere.com/docs/rate-limits),
// Jina (jina.ai/api-dashboard/rate-limit) — and servers without limits of
// their own behind a gateway (vLLM, llama.cpp) are paced by their 429s
// alone: a pause of the backoff and a pace cut below the rate answers came at.
func TestBlind429sCutThePace(t *testing.T) {
	g := New(Config{Ceiling: 8})
	for range 10 { // answers at some rate first
		tk, _ := g.Acquire(context.Background(), 0)
		tk.Done(Outcome{Status: 200})
	}
	tk, _ := g.Acquire(context.Background(), 0)
	tk.Done(Outcome{Status: 429, Limited: true})
	s := g.Snapshot()
	if s.By != By429 || s.Rate <= 0 || s.PausedFor < 400*time.Millisecond || !strings.Contains(s.Pace(), "by 429s") {
		t.Fatalf("snapshot %+v (%s): want a pace set by 429s and a pause of the backoff", s, s.Pace())
	}
}

// A server whose headers claim a billion requests a minute and none left
// still gets a pause after its 429: no storm of immediate retries.
func TestPauseHasAFloor(t *testing.T) {
	g := New(Config{Ceiling: 4})
	tk, _ := g.Acquire(context.Background(), 0)
	tk.Done(Outcome{Status: 429, Limited: true, Header: header("x-ratelimit-limit-requests", "1000000000",
		"x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "1ms")})
	t0 := time.Now()
	tk, err := g.Acquire(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	tk.Done(Outcome{Status: 200})
	if d := time.Since(t0); d < 45*time.Millisecond {
		t.Fatalf("the next request went after %s, want the 50 ms floor", d)
	}
}

func TestServerSlotsKeepAFixedLimit(t *testing.T) {
	g := New(Config{Ceiling: 16, Fixed: true, Mode: SelfHosted})
	g.ServerSlots(2)
	if s := g.Snapshot(); s.Limit != 16 || s.LimitBy != ByFixed {
		t.Fatalf("limit %s, want the fixed 16", s.Concurrency())
	}
	a := New(Config{Ceiling: 16, Mode: SelfHosted})
	a.ServerSlots(4)
	if s := a.Snapshot(); s.Limit != 8 || s.LimitBy != BySlots || s.Concurrency() != "8 of 16, server slots" {
		t.Fatalf("limit %s, want two a slot of the server's 4", s.Concurrency())
	}
}

// A Retry-After of a day pauses the model for 5 minutes at most, the cap
// the retrier has always put on a server's Retry-After.
func TestPauseHasACeiling(t *testing.T) {
	g := New(Config{Ceiling: 4})
	tk, _ := g.Acquire(context.Background(), 0)
	tk.Done(Outcome{Status: 429, Limited: true, Header: header("Retry-After", "86400")})
	if p := g.Snapshot().PausedFor; p > 5*time.Minute || p < 4*time.Minute {
		t.Fatalf("paused for %s, want the 5-minute cap", p)
	}
}
