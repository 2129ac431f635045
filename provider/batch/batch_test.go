package batch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/provider"
)

func TestShare(t *testing.T) {
	for _, tt := range []struct{ total, n int }{{0, 3}, {10, 3}, {7, 7}, {5, 8}, {1000, 32}} {
		sum := 0
		for i := range tt.n {
			s := Share(tt.total, tt.n, i)
			if s < tt.total/tt.n || s > tt.total/tt.n+1 {
				t.Errorf("Share(%d, %d, %d) = %d", tt.total, tt.n, i, s)
			}
			sum += s
		}
		if sum != tt.total {
			t.Errorf("shares of %d over %d sum to %d", tt.total, tt.n, sum)
		}
	}
}

func TestAllCallersLeaveCancelsSend(t *testing.T) {
	cancelled := make(chan struct{})
	var once sync.Once
	// The two callers may land in one batch or, on a slow machine, in two:
	// either way every send must be cancelled once its callers left.
	b := New(2, time.Millisecond, func(ctx context.Context, in []int) ([]int, error) {
		<-ctx.Done()
		once.Do(func() { close(cancelled) })
		return nil, ctx.Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			if _, err := b.Do(ctx, i); !errors.Is(err, context.Canceled) || !provider.Retryable(err) {
				t.Errorf("err = %v, want a Transient error wrapping context.Canceled", err)
			}
		})
	}
	time.Sleep(20 * time.Millisecond)
	cancel()
	wg.Wait()
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the send was not cancelled when every caller left")
	}
}

func TestLeftBeforeSendNotSent(t *testing.T) {
	var mu sync.Mutex
	var sent [][]int
	b := New(10, 200*time.Millisecond, func(_ context.Context, in []int) ([]int, error) {
		mu.Lock()
		sent = append(sent, in)
		mu.Unlock()
		return in, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { b.Do(ctx, 1) })
	wg.Go(func() {
		if v, err := b.Do(context.Background(), 2); err != nil || v != 2 {
			t.Errorf("Do = %v, %v", v, err)
		}
	})
	wg.Wait()
	if len(sent) != 1 || len(sent[0]) != 1 || sent[0][0] != 2 {
		t.Fatalf("sent = %v, want [[2]]", sent)
	}
}

func TestResultCountMismatch(t *testing.T) {
	b := New(1, 0, func(context.Context, []int) ([]int, error) { return nil, nil })
	var pe *provider.Error
	if _, err := b.Do(context.Background(), 1); !errors.As(err, &pe) || pe.Kind != provider.BadResponse {
		t.Fatalf("err = %v, want BadResponse", err)
	}
}

func TestConfig(t *testing.T) {
	if err := (Config{BatchSize: 97}).Validate(96); err == nil {
		t.Error("batch_size above the maximum accepted")
	}
	if err := (Config{BatchWait: -1}).Validate(96); err == nil {
		t.Error("negative batch_wait accepted")
	}
	c := Config{}.WithDefaults(16)
	if c.BatchSize != 16 || time.Duration(c.BatchWait) != DefaultWait {
		t.Errorf("WithDefaults = %+v", c)
	}
}

func TestSendCarriesFirstCallersTrace(t *testing.T) {
	for _, size := range []int{1, 4} {
		t.Run(fmt.Sprintf("size %d", size), func(t *testing.T) {
			tr := &provider.Trace{}
			var got *provider.Trace
			b := New(size, time.Millisecond, func(ctx context.Context, in []int) ([]int, error) {
				got = provider.ContextTrace(ctx)
				return in, nil
			})
			if _, err := b.Do(provider.WithTrace(context.Background(), tr), 7); err != nil {
				t.Fatal(err)
			}
			if got != tr {
				t.Errorf("send saw trace %p, want the caller's %p", got, tr)
			}
		})
	}
}

// errBad is the error of a request holding a "bad" input (negative here),
// as a provider fails a whole request for one image it cannot decode.
var errBad = &provider.Error{Kind: provider.Permanent, Status: 400, Message: "bad input"}

func TestSplitIsolatesBadInputs(t *testing.T) {
	tests := []struct {
		name       string
		inputs     []int
		split      bool
		wantFailed []int // inputs whose callers get errBad
		// wantSends bounds the requests: the batch, then two halves per
		// level down to each bad input (which halves depends on the order
		// in which the callers arrived).
		wantSends [2]int
	}{
		{name: "one bad input of eight", inputs: []int{1, 2, 3, -4, 5, 6, 7, 8}, split: true, wantFailed: []int{-4}, wantSends: [2]int{7, 7}},
		{name: "two bad inputs", inputs: []int{-1, 2, 3, 4, 5, 6, 7, -8}, split: true, wantFailed: []int{-1, -8}, wantSends: [2]int{7, 11}},
		{name: "all bad", inputs: []int{-1, -2, -3}, split: true, wantFailed: []int{-1, -2, -3}, wantSends: [2]int{5, 5}},
		{name: "no bad input", inputs: []int{1, 2, 3, 4}, split: true, wantSends: [2]int{1, 1}},
		{name: "not splittable", inputs: []int{1, -2, 3}, split: false, wantFailed: []int{1, -2, 3}, wantSends: [2]int{1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			sends := 0
			b := New(len(tt.inputs), time.Second, func(_ context.Context, in []int) ([]int, error) {
				mu.Lock()
				sends++
				mu.Unlock()
				for _, v := range in {
					if v < 0 {
						return nil, errBad
					}
				}
				out := make([]int, len(in))
				for i, v := range in {
					out[i] = 10 * v
				}
				return out, nil
			}).SplitOn(func(err error) bool { return tt.split && errors.Is(err, errBad) })
			var wg sync.WaitGroup
			var failed []int
			for _, v := range tt.inputs {
				wg.Go(func() {
					got, err := b.Do(context.Background(), v)
					switch {
					case errors.Is(err, errBad):
						mu.Lock()
						failed = append(failed, v)
						mu.Unlock()
					case err != nil || got != 10*v:
						t.Errorf("Do(%d) = %d, %v; want %d", v, got, err, 10*v)
					}
				})
			}
			wg.Wait()
			slices.Sort(failed)
			want := slices.Sorted(slices.Values(tt.wantFailed))
			if !slices.Equal(failed, want) {
				t.Errorf("failed inputs = %v, want %v", failed, want)
			}
			if sends < tt.wantSends[0] || sends > tt.wantSends[1] {
				t.Errorf("sends = %d, want %d to %d", sends, tt.wantSends[0], tt.wantSends[1])
			}
		})
	}
}

func TestWeighClosesBatches(t *testing.T) {
	var mu sync.Mutex
	var batches [][]int
	b := New(100, 300*time.Millisecond, func(_ context.Context, in []int) ([]int, error) {
		mu.Lock()
		batches = append(batches, slices.Clone(in))
		mu.Unlock()
		return in, nil
	}).Weigh(func(v int) int { return v }, 10)
	var wg sync.WaitGroup
	// Sequential arrivals, so that the packing is deterministic: 4+4 fit,
	// 4 more would make 12 > 10; 11 is heavier than the limit alone.
	for _, v := range []int{4, 4, 4, 11, 3} {
		wg.Go(func() {
			if got, err := b.Do(context.Background(), v); err != nil || got != v {
				t.Errorf("Do(%d) = %d, %v", v, got, err)
			}
		})
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
	want := [][]int{{4, 4}, {4}, {11}, {3}}
	if len(batches) != len(want) {
		t.Fatalf("batches = %v, want %v", batches, want)
	}
	for _, w := range want {
		if !slices.ContainsFunc(batches, func(got []int) bool { return slices.Equal(got, w) }) {
			t.Fatalf("batches = %v, want %v", batches, want)
		}
	}
}
