package provider

import (
	"context"
	"sync"
	"time"
)

// Limiter bounds the requests one model sends: at most maxConcurrency in
// flight, and at most requestsPerMinute started per minute, evenly spaced
// (one every minute/requestsPerMinute, no burst), so that a backlog never
// trips a provider's per-minute quota. Every HTTP attempt, retries included,
// acquires the limiter once.
//
// A Limiter is safe for concurrent use. A nil *Limiter limits nothing.
type Limiter struct {
	sem      chan struct{} // nil = no concurrency bound
	interval time.Duration // 0 = no pacing

	mu   sync.Mutex
	next time.Time // earliest start of the next request
}

// NewLimiter returns a limiter of maxConcurrency requests in flight and
// requestsPerMinute requests started per minute; 0 (or less) leaves that
// dimension unlimited.
func NewLimiter(maxConcurrency, requestsPerMinute int) *Limiter {
	l := &Limiter{}
	if maxConcurrency > 0 {
		l.sem = make(chan struct{}, maxConcurrency)
	}
	if requestsPerMinute > 0 {
		l.interval = time.Minute / time.Duration(requestsPerMinute)
	}
	return l
}

// Acquire waits for a free slot and for the request's turn under the rate,
// then returns a release function that frees the slot; calling it more than
// once is harmless. When ctx ends first, Acquire returns ctx's error and holds
// nothing.
//
// The concurrency slot is taken before the rate turn, so the turn is spent
// only by a request that can actually start.
func (l *Limiter) Acquire(ctx context.Context) (release func(), err error) {
	if l == nil {
		return func() {}, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	release = func() {}
	if l.sem != nil {
		select {
		case l.sem <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		release = sync.OnceFunc(func() { <-l.sem })
	}
	if err := l.pace(ctx); err != nil {
		release()
		return nil, err
	}
	return release, nil
}

// pace reserves the next start time and waits for it. A reservation given up
// because ctx ended is handed back when no later one was made since.
func (l *Limiter) pace(ctx context.Context) error {
	if l.interval <= 0 {
		return nil
	}
	l.mu.Lock()
	now := time.Now()
	at := l.next
	if at.Before(now) {
		at = now
	}
	l.next = at.Add(l.interval)
	l.mu.Unlock()

	if err := SleepContext(ctx, at.Sub(now)); err != nil {
		l.mu.Lock()
		if l.next.Equal(at.Add(l.interval)) {
			l.next = at
		}
		l.mu.Unlock()
		return err
	}
	return nil
}
