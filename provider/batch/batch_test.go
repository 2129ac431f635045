package batch

import (
	"context"
	"errors"
	"fmt"
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
	b := New(2, time.Millisecond, func(ctx context.Context, in []int) ([]int, error) {
		<-ctx.Done()
		close(cancelled)
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
