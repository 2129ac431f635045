package cost

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/functions"
)

func TestCacheOneCallPerIdenticalWork(t *testing.T) {
	c := NewCache(2, 1<<20)
	var calls atomic.Int32
	release := make(chan struct{})
	call := func() (functions.Result, error) {
		calls.Add(1)
		<-release
		return functions.Result{Text: "x"}, nil
	}
	k := work.KeyOf(functions.Complete, "m", "", "p", []byte("img"))
	var wg sync.WaitGroup
	hits := atomic.Int32{}
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, hit, err := c.Do(context.Background(), k, call)
			if err != nil || r.Text != "x" {
				t.Errorf("do = %+v, %v", r, err)
			}
			if hit {
				hits.Add(1)
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	close(release)
	wg.Wait()
	if calls.Load() != 1 || hits.Load() != 9 {
		t.Fatalf("calls %d hits %d, want 1 and 9", calls.Load(), hits.Load())
	}
	// Remembered afterwards.
	if _, hit, _ := c.Do(context.Background(), k, call); !hit || calls.Load() != 1 {
		t.Fatal("second call not served from the cache")
	}
}

func TestCacheKeyDistinguishesEveryPart(t *testing.T) {
	base := work.KeyOf(functions.Complete, "m", "", "p", []byte("img"))
	for name, k := range map[string]work.Key{
		"function": work.KeyOf(functions.Embed, "m", "", "p", []byte("img")),
		"model":    work.KeyOf(functions.Complete, "m2", "", "p", []byte("img")),
		"prompt":   work.KeyOf(functions.Complete, "m", "", "p2", []byte("img")),
		"image":    work.KeyOf(functions.Complete, "m", "", "p", []byte("img2")),
		"input":    work.KeyOf(functions.Complete, "m", "normalize v1", "p", []byte("img")),
		"boundary": work.KeyOf(functions.Complete, "mp", "", "", []byte("img")),
	} {
		if k == base {
			t.Errorf("%s does not change the key", name)
		}
	}
}

func TestCacheForgetsFailuresAndEvicts(t *testing.T) {
	c := NewCache(2, 1<<20)
	var calls int
	fail := func() (functions.Result, error) { calls++; return functions.Result{}, errors.New("boom") }
	k := work.KeyOf(functions.Complete, "m", "", "p", []byte("a"))
	c.Do(context.Background(), k, fail)
	c.Do(context.Background(), k, fail)
	if calls != 2 {
		t.Fatalf("transient failure was cached: %d calls", calls)
	}
	// A permanent failure is remembered until forgotten (pgimageai retry).
	calls = 0
	permanent := func() (functions.Result, error) {
		calls++
		return functions.Result{Null: true}, &functions.Error{Reason: functions.BadResponse, Detail: "wrong dimension"}
	}
	kp := work.KeyOf(functions.Embed, "m", "", "", []byte("p"))
	for range 3 {
		if _, _, err := c.Do(context.Background(), kp, permanent); functions.ReasonOf(err) != functions.BadResponse {
			t.Fatalf("err %v, want bad_response", err)
		}
	}
	if calls != 1 {
		t.Fatalf("%d calls for a permanent failure, want 1", calls)
	}
	c.Forget(kp)
	c.Do(context.Background(), kp, permanent)
	if calls != 2 {
		t.Fatalf("forget did not make the call again")
	}
	c.Forget(kp)
	ok := func() (functions.Result, error) { calls++; return functions.Result{Text: "ok"}, nil }
	for _, img := range []string{"1", "2", "3"} {
		c.Do(context.Background(), work.KeyOf(functions.Complete, "m", "", "p", []byte(img)), ok)
	}
	if _, size := c.Stats(); size != 2 {
		t.Fatalf("cache holds %d entries, max 2", size)
	}
	calls = 0
	c.Do(context.Background(), work.KeyOf(functions.Complete, "m", "", "p", []byte("1")), ok) // evicted: least recent
	c.Do(context.Background(), work.KeyOf(functions.Complete, "m", "", "p", []byte("3")), ok) // kept
	if calls != 1 {
		t.Fatalf("%d calls, want 1 (only the evicted entry)", calls)
	}
}

func TestBudget(t *testing.T) {
	b := NewBudget(100)
	ctx := context.Background()
	if err := b.Acquire(ctx, 60); err != nil {
		t.Fatal(err)
	}
	if b.TryAcquire(50) {
		t.Fatal("over budget granted")
	}
	got := make(chan struct{})
	go func() {
		b.Acquire(ctx, 50)
		close(got)
	}()
	select {
	case <-got:
		t.Fatal("acquire did not wait")
	case <-time.After(20 * time.Millisecond):
	}
	b.Release(60)
	select {
	case <-got:
	case <-time.After(time.Second):
		t.Fatal("acquire not woken by release")
	}
	b.Release(50)
	// Larger than the whole budget: granted when nothing else is held.
	if !b.TryAcquire(1000) {
		t.Fatal("oversized request refused on an empty budget")
	}
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := b.Acquire(tctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire on a full budget = %v, want deadline", err)
	}
	if _, peak := b.InUse(); peak != 1000 {
		t.Fatalf("peak %d", peak)
	}
}

func TestCacheBoundedByBytes(t *testing.T) {
	c := NewCache(1000, 10*(entryOverhead+4*256))
	vec := func() (functions.Result, error) { return functions.Result{Vector: make([]float32, 256)}, nil }
	for i := range 50 {
		c.Do(context.Background(), work.KeyOf(functions.Embed, "m", "", "", []byte{byte(i)}), vec)
	}
	if _, n := c.Stats(); n != 10 {
		t.Fatalf("cache holds %d vectors of 1 KiB, want 10 (bounded by bytes)", n)
	}
	if c.bytes > c.maxBytes {
		t.Fatalf("cache holds %d bytes > %d", c.bytes, c.maxBytes)
	}
}
