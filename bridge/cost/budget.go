package cost

import (
	"context"
	"sync"
)

// Budget bounds the bytes of images in flight (and of the items waiting in
// lanes). A request larger than the
// whole budget is granted alone (when nothing else is held), so one huge image
// never deadlocks the stream. It is safe for concurrent use.
type Budget struct {
	mu   sync.Mutex
	cap  int64
	used int64
	wake chan struct{} // closed and replaced whenever bytes are released
	peak int64
}

// NewBudget returns a budget of capacity bytes.
func NewBudget(capacity int64) *Budget {
	return &Budget{cap: capacity, wake: make(chan struct{})}
}

// Acquire blocks until n bytes fit in the budget or ctx ends.
func (b *Budget) Acquire(ctx context.Context, n int64) error {
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

// TryAcquire takes n bytes if they fit now.
func (b *Budget) TryAcquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used == 0 || b.used+n <= b.cap {
		b.used += n
		b.peak = max(b.peak, b.used)
		return true
	}
	return false
}

// Release returns n bytes.
func (b *Budget) Release(n int64) {
	b.mu.Lock()
	b.used -= n
	close(b.wake)
	b.wake = make(chan struct{})
	b.mu.Unlock()
}

// InUse returns the bytes held now and the peak so far.
func (b *Budget) InUse() (now, peak int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak
}
