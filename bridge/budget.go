package bridge

import (
	"context"
	"sync"
)

// budget bounds the bytes of images in flight. A request larger than the
// whole budget is granted alone (when nothing else is held), so one huge image
// never deadlocks the stream. It is safe for concurrent use.
type budget struct {
	mu   sync.Mutex
	cap  int64
	used int64
	wake chan struct{} // closed and replaced whenever bytes are released
	peak int64
}

func newBudget(capacity int64) *budget {
	return &budget{cap: capacity, wake: make(chan struct{})}
}

// acquire blocks until n bytes fit in the budget or ctx ends.
func (b *budget) acquire(ctx context.Context, n int64) error {
	for {
		b.mu.Lock()
		if b.used == 0 || b.used+n <= b.cap {
			b.used += n
			b.peak = max(b.peak, b.used)
			b.mu.Unlock()
			return nil
		}
		wake := b.wake
		b.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// tryAcquire takes n bytes if they fit now.
func (b *budget) tryAcquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used == 0 || b.used+n <= b.cap {
		b.used += n
		b.peak = max(b.peak, b.used)
		return true
	}
	return false
}

// release returns n bytes.
func (b *budget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	close(b.wake)
	b.wake = make(chan struct{})
	b.mu.Unlock()
}

// inUse returns the bytes held now and the peak so far.
func (b *budget) inUse() (now, peak int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak
}
