package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/pgimageai/pgimageai/internal/backoff"
)

// readBounded reads body to its end, at most limit bytes of it: a body that
// runs past limit is cut after limit+1 bytes and is too_large; a body that
// ends before (or runs past) the size its store announced (size ≥ 0) is a
// transient error (a truncated transfer, or a store that lies about sizes).
func readBounded(body io.Reader, size, limit int64) ([]byte, error) {
	if size > limit {
		return nil, tooLarge(size, limit)
	}
	capacity := int64(64 << 10)
	if size >= 0 {
		capacity = size + 1
	}
	buf := make([]byte, 0, min(capacity, limit+1))
	for {
		if len(buf) == cap(buf) {
			// Unknown size (or a body past its size): grow by doubling, never
			// past limit+1.
			grow := min(int64(cap(buf)), limit+1-int64(len(buf)))
			if grow <= 0 {
				break
			}
			buf = slices.Grow(buf, int(grow))
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, &Error{Reason: ReasonTooLarge, Err: fmt.Errorf("body runs past the bound of %d bytes", limit)}
		}
		if size >= 0 && int64(len(buf)) > size {
			return nil, transient(fmt.Errorf("body runs past its announced size of %d bytes", size))
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, classify(err)
		}
	}
	if size >= 0 && int64(len(buf)) != size {
		return nil, transient(fmt.Errorf("body of %d bytes, %d announced (truncated)", len(buf), size))
	}
	return buf, nil
}

func tooLarge(size, limit int64) *Error {
	return &Error{Reason: ReasonTooLarge, Err: fmt.Errorf("object of %d bytes, more than the bound of %d", size, limit)}
}

func transient(err error) *Error {
	return &Error{Reason: ReasonStoreUnavailable, Transient: true, Err: err}
}

// classify turns a network error into a transient *Error; an *Error passes.
func classify(err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	if errors.Is(err, context.Canceled) {
		return err // the caller's own cancellation, not the store's failure
	}
	// Timeouts, resets, refused connections, truncated bodies: the store's
	// trouble, not the object's.
	return transient(err)
}

// limiter is a store's request semaphore (max_concurrency) and its retry
// policy: bounded attempts with backoff after transient errors, each attempt
// under the store's timeout.
type limiter struct {
	sem     chan struct{}
	timeout time.Duration
	retries int
	backoff backoff.Backoff // copied per call
}

func newLimiter(o Options) *limiter {
	return &limiter{
		sem:     make(chan struct{}, o.MaxConcurrency),
		timeout: o.Timeout,
		retries: o.Retries,
		backoff: backoff.Backoff{Min: 100 * time.Millisecond, Max: 2 * time.Second},
	}
}

// do runs attempt under the semaphore and the timeout, again after a
// transient failure while retries last. The semaphore is released during
// the backoff. When ctx ends, do returns ctx's error (never an *Error): the
// caller's cancellation or deadline is not the store's outage.
func (l *limiter) do(ctx context.Context, attempt func(ctx context.Context) error) error {
	b := l.backoff
	for i := 0; ; i++ {
		err := l.once(ctx, attempt)
		if err != nil && ctx.Err() != nil {
			return ctx.Err() // the caller's end, not the store's failure
		}
		if err == nil || !IsTransient(err) || i >= l.retries {
			return err
		}
		if werr := b.Sleep(ctx); werr != nil {
			return werr
		}
	}
}

func (l *limiter) once(ctx context.Context, attempt func(ctx context.Context) error) error {
	select {
	case l.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-l.sem }()
	actx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	err := attempt(actx)
	if err != nil && ctx.Err() == nil && actx.Err() != nil {
		var e *Error
		if !errors.As(err, &e) || !e.Transient {
			return transient(fmt.Errorf("timed out after %s: %w", l.timeout, err))
		}
	}
	return err
}

// DefaultMaxBytes bounds a body when neither the caller nor the store's
// max_bytes does.
const DefaultMaxBytes = 64 << 20

// effectiveLimit is the smaller of the caller's bound and the store's own;
// a caller's bound ≤ 0 means the store's alone.
func effectiveLimit(maxBytes int64, o Options) int64 {
	switch {
	case maxBytes <= 0 && o.MaxBytes <= 0:
		return DefaultMaxBytes
	case maxBytes <= 0:
		return o.MaxBytes
	case o.MaxBytes > 0 && o.MaxBytes < maxBytes:
		return o.MaxBytes
	}
	return maxBytes
}
