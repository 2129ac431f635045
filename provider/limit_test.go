package provider

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestLimiterConcurrency(t *testing.T) {
	const limit = 3
	l := NewLimiter(limit, 0)
	var inFlight, peak atomic.Int32
	var wg sync.WaitGroup
	for range 30 {
		wg.Go(func() {
			release, err := l.Acquire(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			defer release()
			n := inFlight.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			time.Sleep(2 * time.Millisecond)
			inFlight.Add(-1)
		})
	}
	wg.Wait()
	if p := peak.Load(); p > limit || p < 1 {
		t.Fatalf("peak in flight = %d, want 1..%d", p, limit)
	}
}

// TestLimiterPacing runs on synctest's fake clock: 60 rpm starts requests
// exactly one second apart, whether they come one by one or all at once.
func TestLimiterPacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter(0, 60)
		start := time.Now()
		var mu sync.Mutex
		var starts []time.Duration
		var wg sync.WaitGroup
		for range 5 {
			wg.Go(func() {
				release, err := l.Acquire(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				defer release()
				mu.Lock()
				starts = append(starts, time.Since(start))
				mu.Unlock()
			})
		}
		wg.Wait()
		seen := map[time.Duration]bool{}
		for _, s := range starts {
			seen[s] = true
		}
		for i := range 5 {
			if !seen[time.Duration(i)*time.Second] {
				t.Fatalf("starts = %v, want one at each of 0s..4s", starts)
			}
		}

		// After an idle period the next request starts at once (no debt), and
		// the one after it waits a full interval.
		time.Sleep(10 * time.Second)
		t0 := time.Now()
		for range 2 {
			release, err := l.Acquire(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			release()
		}
		if got := time.Since(t0); got != time.Second {
			t.Fatalf("two requests after idle took %v, want 1s", got)
		}
	})
}

func TestLimiterCancelWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter(1, 60)
		release, err := l.Acquire(context.Background()) // takes the slot and the turn at 0s
		if err != nil {
			t.Fatal(err)
		}
		// Waiting for the slot.
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if _, err := l.Acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want DeadlineExceeded", err)
		}
		release()
		release() // idempotent: must not free a second slot

		// Waiting for the turn (1s after the first): giving up hands the turn back.
		ctx2, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel2()
		if _, err := l.Acquire(ctx2); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want DeadlineExceeded", err)
		}
		t0 := time.Now()
		release, err = l.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		// The turn at 1s is free again: started 300ms in, we wait 700ms, not 1.7s.
		if got := time.Since(t0); got != 700*time.Millisecond {
			t.Fatalf("waited %v, want 700ms", got)
		}
	})
}

func TestLimiterReleaseTwiceFreesOneSlot(t *testing.T) {
	l := NewLimiter(1, 0)
	r1, _ := l.Acquire(context.Background())
	r1()
	r1()
	r2, err := l.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer r2()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := l.Acquire(ctx); err == nil {
		t.Fatal("a second slot was free after a double release")
	}
}

func TestLimiterNilAndUnlimited(t *testing.T) {
	for _, l := range []*Limiter{nil, NewLimiter(0, 0)} {
		for range 100 {
			release, err := l.Acquire(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			release()
		}
	}
}
