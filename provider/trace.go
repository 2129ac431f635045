package provider

import (
	"context"
	"time"
)

// Trace observes the requests of a provider call, the way
// net/http/httptrace.ClientTrace observes an HTTP request: the caller puts
// it in the call's context with WithTrace, and the provider machinery
// (Retrier) reports to it. Its functions may be called from any goroutine.
type Trace struct {
	// Retry is called before the wait that precedes a retry, with the
	// number of attempts made so far and the error that caused the retry.
	Retry func(attempt int, err error, wait time.Duration)
	// Paced is called when a request met a rate limit and goes again at the
	// model's pace, without spending a retry.
	Paced func(err error)
	// Attempt is called after each request with its outcome (nil: it
	// succeeded). When it returns true after a failed request, the Retrier
	// stops and returns that failure without retrying (the model's circuit
	// opened, or the request was its probe).
	Attempt func(err error) (stop bool)
}

type traceKey struct{}

// WithTrace returns a context that carries t.
func WithTrace(ctx context.Context, t *Trace) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

// ContextTrace returns the Trace in ctx, or nil.
func ContextTrace(ctx context.Context) *Trace {
	t, _ := ctx.Value(traceKey{}).(*Trace)
	return t
}

func (t *Trace) retry(attempt int, err error, wait time.Duration) {
	if t != nil && t.Retry != nil {
		t.Retry(attempt, err, wait)
	}
}

func (t *Trace) paced(err error) {
	if t != nil && t.Paced != nil {
		t.Paced(err)
	}
}

func (t *Trace) attempt(err error) bool {
	return t != nil && t.Attempt != nil && t.Attempt(err)
}
