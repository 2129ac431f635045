package replication

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	b := backoff{min: 100 * time.Millisecond, max: 10 * time.Second}
	ceil := b.min
	for i := 0; i < 20; i++ {
		d := b.next()
		if d < ceil/2 || d > ceil {
			t.Fatalf("attempt %d: delay %v outside [%v, %v]", i, d, ceil/2, ceil)
		}
		ceil = min(2*ceil, b.max)
	}
	b.reset()
	if d := b.next(); d > b.min {
		t.Errorf("after reset: %v > %v", d, b.min)
	}
}
