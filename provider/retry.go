package provider

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/pgimageai/pgimageai/provider/pace"
)

// pacedBackstop is how many rate-limited attempts in a row go again at
// once (the governor waits) before the Retrier waits a backoff of its own.
const pacedBackstop = 8

// Defaults of a zero Retrier.
const (
	DefaultRetryBase     = 500 * time.Millisecond // first backoff
	DefaultRetryMax      = 30 * time.Second       // backoff cap
	DefaultMaxRetryAfter = 5 * time.Minute        // cap on a server's Retry-After
)

// Retrier runs a provider call and retries it while it fails with a
// Transient *Error (I/O errors, timeouts, 408, 409, 429, 5xx — the provider contract).
// Permanent and BadResponse errors, and errors that are not *Error, are
// returned at once.
//
// A RateLimited error (a 429, a 503 with Retry-After) is sent again at once
// and without limit, spending no retry: the wait is the model's, in its
// governor (provider/pace), which paused every request of the model when
// the answer came. Only ctx ends such a call.
//
// Between attempts it waits the server's Retry-After when the error carries
// one (capped at MaxRetryAfter), otherwise an exponential backoff with
// decorrelated jitter: each wait is drawn uniformly from [Base, 3×previous]
// and capped at Max, so that many rows failing together do not retry in step.
//
// A Retrier is a value with no state of its own; Do is safe for concurrent use.
type Retrier struct {
	MaxRetries    int           // retries after the first attempt; 0 = one attempt only
	Base          time.Duration // first backoff; 0 = DefaultRetryBase
	Max           time.Duration // longest backoff; 0 = DefaultRetryMax
	MaxRetryAfter time.Duration // longest Retry-After honoured; 0 = DefaultMaxRetryAfter

	// Sleep waits d or until ctx is done; nil = SleepContext. Tests inject a
	// recorder here instead of sleeping.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Do calls call until it succeeds, fails for good, or the retries are spent.
// call receives ctx and should bound each attempt itself (per-request timeout,
// rate limiting).
//
// The error returned for a failed call is the last *Error, copied, with
// Attempts set to the number of calls made. When ctx ends — during an attempt
// or a wait — Do returns promptly with an *Error that wraps ctx's error, so
// errors.Is(err, context.Canceled) tells shutdown apart from a provider
// failure.
func (r Retrier) Do(ctx context.Context, call func(ctx context.Context) error) error {
	base, maxWait, maxRetryAfter := r.limits()
	sleep := r.Sleep
	if sleep == nil {
		sleep = SleepContext
	}
	prev := base
	var last *Error
	paced := 0 // attempts that met a rate limit: not counted against MaxRetries
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return stopped(err, last, attempt-1)
		}
		err := call(ctx)
		stop := ContextTrace(ctx).attempt(err)
		if err == nil {
			return nil
		}
		var pe *Error
		if !errors.As(err, &pe) {
			return err
		}
		e := *pe // never mutate the callee's value
		e.Attempts = attempt
		last = &e
		if e.Kind != Transient || stop {
			return last
		}
		if err := ctx.Err(); err != nil {
			return stopped(err, last, attempt)
		}
		if e.RateLimited {
			paced++
			ContextTrace(ctx).paced(last)
			if paced%pacedBackstop != 0 {
				continue
			}
			// Many in a row: the governor's pauses are not holding the
			// server off (or there is no governor). Wait a backoff too,
			// still without spending a retry.
			prev = decorrelated(base, prev, maxWait)
			if err := sleep(ctx, max(prev, min(e.RetryAfter, maxRetryAfter))); err != nil {
				return stopped(err, last, attempt)
			}
			continue
		}
		if attempt-paced > r.MaxRetries {
			return last
		}
		var wait time.Duration
		if e.RetryAfter > 0 {
			wait = min(e.RetryAfter, maxRetryAfter)
		} else {
			prev = decorrelated(base, prev, maxWait)
			wait = prev
		}
		ContextTrace(ctx).retry(attempt, last, wait)
		if err := sleep(ctx, wait); err != nil {
			return stopped(err, last, attempt)
		}
	}
}

func (r Retrier) limits() (base, maxWait, maxRetryAfter time.Duration) {
	base, maxWait, maxRetryAfter = r.Base, r.Max, r.MaxRetryAfter
	if base <= 0 {
		base = DefaultRetryBase
	}
	if maxWait <= 0 {
		maxWait = DefaultRetryMax
	}
	if maxWait < base {
		maxWait = base
	}
	if maxRetryAfter <= 0 {
		maxRetryAfter = DefaultMaxRetryAfter
	}
	return base, maxWait, maxRetryAfter
}

// decorrelated returns the next "decorrelated jitter" backoff: uniform in
// [base, 3×prev], capped at maxWait. See
// https://aws.amazon.com/blogs/architecture/exponential-backoff-and-jitter/.
func decorrelated(base, prev, maxWait time.Duration) time.Duration {
	hi := min(3*prev, maxWait)
	if hi <= base {
		return base
	}
	return base + time.Duration(rand.Int64N(int64(hi-base)+1))
}

// stopped builds the error of a retry loop that ctx (or Sleep) ended.
func stopped(cause error, last *Error, attempts int) *Error {
	if last == nil {
		return &Error{Kind: Transient, Message: cause.Error(), Attempts: attempts, Err: cause}
	}
	e := *last
	e.Attempts = attempts
	if e.Kind == Transient && !errors.Is(&e, cause) {
		e.Message = fmt.Sprintf("%s; gave up retrying: %v", e.Message, cause)
		e.Err = errors.Join(cause, e.Err)
	}
	return &e
}

// SleepContext waits d, or until ctx is done and then returns ctx's error.
func SleepContext(ctx context.Context, d time.Duration) error { return pace.Sleep(ctx, d) }
