// Package backoff is the module's one retry delay: exponential growth with
// jitter between two bounds. Every retry loop of pgimageai (replication
// reconnects, target writes, backfill pages, reads of the source and target
// for the bridge's configuration) waits through it, each with its own
// bounds.
//
// Layer: toolkit.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff yields exponentially growing delays with jitter: the n-th delay
// (from 0) is drawn uniformly from [d/2, d] with d = Min·2ⁿ capped at Max, so
// that several clients cut off together do not retry in lockstep ("equal
// jitter", https://aws.amazon.com/blogs/architecture/exponential-backoff-and-jitter/).
// A Max below Min is taken as Min; a Min of zero (or less) yields no delay.
//
// The zero value waits not at all. A Backoff is not safe for concurrent use:
// each retry loop owns its own.
type Backoff struct {
	Min, Max time.Duration
	cur      time.Duration // the ceiling of the last delay; 0 = none yet
}

// Next returns the delay before the next attempt and grows the ceiling for
// the one after.
func (b *Backoff) Next() time.Duration {
	lo, hi := max(b.Min, 0), max(b.Max, b.Min, 0)
	switch {
	case b.cur == 0:
		b.cur = lo
	case b.cur < hi:
		b.cur *= 2
	}
	b.cur = min(b.cur, hi)
	half := b.cur / 2
	return half + rand.N(b.cur-half+1)
}

// Reset starts the sequence again at Min, after an attempt that worked.
func (b *Backoff) Reset() { b.cur = 0 }

// Sleep waits Next(), or until ctx is done and then returns ctx's error.
func (b *Backoff) Sleep(ctx context.Context) error {
	return Wait(ctx, b.Next())
}

// Wait waits d, or until ctx is done and then returns ctx's error. It
// returns ctx's error, if any, also when d is not positive.
func Wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
