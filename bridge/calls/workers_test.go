package calls

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestWorkers(t *testing.T) {
	tests := []struct {
		name  string
		limit int
		jobs  int
	}{
		{"one worker runs jobs in order", 1, 50},
		{"a limit of 0 is one worker", 0, 20},
		{"at most the limit run at once", 4, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := workers{sp: testSpawner(t)}
			var running, peak atomic.Int32
			var mu sync.Mutex
			var order []int
			var wg sync.WaitGroup
			for i := range tt.jobs {
				wg.Add(1)
				w.submit("m", tt.limit, func(context.Context) {
					defer wg.Done()
					n := running.Add(1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					mu.Lock()
					order = append(order, i)
					mu.Unlock()
					time.Sleep(100 * time.Microsecond)
					running.Add(-1)
				})
			}
			wg.Wait()
			if len(order) != tt.jobs {
				t.Fatalf("%d jobs ran, want %d", len(order), tt.jobs)
			}
			if want := int32(max(tt.limit, 1)); peak.Load() > want {
				t.Errorf("%d jobs ran at once, want at most %d", peak.Load(), want)
			}
			if tt.limit <= 1 {
				for i, j := range order {
					if i != j {
						t.Fatalf("order %v: want the order of submission", order)
					}
				}
			}
			waitIdle(t, &w)
		})
	}
}

// TestWorkersIsolateModels: a model whose jobs block does not delay
// another model's.
func TestWorkersIsolateModels(t *testing.T) {
	w := workers{sp: testSpawner(t)}
	release := make(chan struct{})
	for range 8 {
		w.submit("slow", 2, func(context.Context) { <-release })
	}
	done := make(chan struct{})
	w.submit("fast", 2, func(context.Context) { close(done) })
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the fast model's job waited for the slow model's")
	}
	close(release)
	waitIdle(t, &w)
}

// waitIdle waits until every queue's goroutines left, as they do when it is
// empty.
func waitIdle(t *testing.T, w *workers) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		w.mu.Lock()
		n := len(w.queues)
		w.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d queues still served after their jobs ended", n)
		}
		time.Sleep(time.Millisecond)
	}
}
