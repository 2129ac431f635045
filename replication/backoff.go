package replication

import (
	"math/rand/v2"
	"time"
)

// backoff yields exponentially growing reconnect delays with jitter: the
// n-th delay is drawn from [d/2, d] with d = min·2ⁿ capped at max, so that
// several bridges cut off together do not reconnect in lockstep. Not safe
// for concurrent use.
type backoff struct {
	min, max time.Duration
	cur      time.Duration
}

// next returns the delay before the next attempt.
func (b *backoff) next() time.Duration {
	switch {
	case b.cur == 0:
		b.cur = b.min
	case b.cur < b.max:
		b.cur *= 2
	}
	if b.cur > b.max {
		b.cur = b.max
	}
	half := b.cur / 2
	return half + rand.N(b.cur-half+1)
}

// reset starts the sequence again after a connection that worked.
func (b *backoff) reset() { b.cur = 0 }
