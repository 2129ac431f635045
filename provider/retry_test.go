package provider

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// recorder is a Retrier.Sleep that records the waits and does not sleep.
type recorder struct{ waits []time.Duration }

func (r *recorder) sleep(ctx context.Context, d time.Duration) error {
	r.waits = append(r.waits, d)
	return ctx.Err()
}

// script returns a call that fails with errs in turn, then succeeds.
func script(errs ...error) (call func(context.Context) error, calls *int) {
	n := 0
	return func(context.Context) error {
		n++
		if n <= len(errs) {
			return errs[n-1]
		}
		return nil
	}, &n
}

func TestRetrierDo(t *testing.T) {
	transient := &Error{Kind: Transient, Status: 503, Message: "overloaded"}
	tests := []struct {
		name         string
		maxRetries   int
		errs         []error
		wantCalls    int
		wantErr      bool
		wantKind     Kind
		wantStatus   int
		wantAttempts int
		wantWaits    []time.Duration // nil = do not check exact values
	}{
		{name: "success first time", maxRetries: 4, wantCalls: 1},
		{name: "transient then success", maxRetries: 4, errs: []error{transient, transient}, wantCalls: 3},
		{name: "retry-after honoured", maxRetries: 4,
			errs:      []error{&Error{Kind: Transient, Status: 429, RetryAfter: 7 * time.Second}},
			wantCalls: 2, wantWaits: []time.Duration{7 * time.Second}},
		{name: "retry-after capped", maxRetries: 4,
			errs:      []error{&Error{Kind: Transient, Status: 429, RetryAfter: time.Hour}},
			wantCalls: 2, wantWaits: []time.Duration{DefaultMaxRetryAfter}},
		{name: "retries spent", maxRetries: 2, errs: []error{transient, transient, transient, transient},
			wantCalls: 3, wantErr: true, wantKind: Transient, wantStatus: 503, wantAttempts: 3},
		{name: "no retries configured", maxRetries: 0, errs: []error{transient},
			wantCalls: 1, wantErr: true, wantKind: Transient, wantStatus: 503, wantAttempts: 1,
			wantWaits: []time.Duration{}},
		{name: "permanent not retried", maxRetries: 4, errs: []error{&Error{Kind: Permanent, Status: 400}},
			wantCalls: 1, wantErr: true, wantKind: Permanent, wantStatus: 400, wantAttempts: 1},
		{name: "bad response not retried", maxRetries: 4, errs: []error{&Error{Kind: BadResponse, Message: "no choices"}},
			wantCalls: 1, wantErr: true, wantKind: BadResponse, wantAttempts: 1},
		{name: "wrapped transient retried", maxRetries: 4, errs: []error{fmt.Errorf("call: %w", transient)},
			wantCalls: 2},
		{name: "transient then permanent", maxRetries: 4, errs: []error{transient, &Error{Kind: Permanent, Status: 404}},
			wantCalls: 2, wantErr: true, wantKind: Permanent, wantStatus: 404, wantAttempts: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			r := Retrier{MaxRetries: tt.maxRetries, Base: 100 * time.Millisecond, Max: time.Second, Sleep: rec.sleep}
			call, calls := script(tt.errs...)
			err := r.Do(context.Background(), call)
			if *calls != tt.wantCalls {
				t.Errorf("calls = %d, want %d", *calls, tt.wantCalls)
			}
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if tt.wantWaits != nil && fmt.Sprint(rec.waits) != fmt.Sprint(tt.wantWaits) {
				t.Errorf("waits = %v, want %v", rec.waits, tt.wantWaits)
			}
			if err == nil {
				return
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("err %T is not *Error", err)
			}
			if pe.Kind != tt.wantKind || pe.Status != tt.wantStatus || pe.Attempts != tt.wantAttempts {
				t.Errorf("got kind %v status %d attempts %d, want %v %d %d",
					pe.Kind, pe.Status, pe.Attempts, tt.wantKind, tt.wantStatus, tt.wantAttempts)
			}
		})
	}
}

func TestRetrierNonProviderErrorReturnedAsIs(t *testing.T) {
	plain := errors.New("boom")
	call, calls := script(plain)
	err := Retrier{MaxRetries: 3, Sleep: (&recorder{}).sleep}.Do(context.Background(), call)
	if err != plain || *calls != 1 {
		t.Fatalf("err = %v after %d calls, want the plain error after 1", err, *calls)
	}
}

func TestRetrierDoesNotMutateCalleeError(t *testing.T) {
	shared := &Error{Kind: Transient, Status: 500}
	call, _ := script(shared, shared, shared)
	_ = Retrier{MaxRetries: 2, Sleep: (&recorder{}).sleep}.Do(context.Background(), call)
	if shared.Attempts != 0 {
		t.Fatalf("callee's error was mutated: Attempts = %d", shared.Attempts)
	}
}

func TestRetrierBackoffBounds(t *testing.T) {
	base, maxWait := 100*time.Millisecond, 2*time.Second
	for range 50 {
		rec := &recorder{}
		errs := make([]error, 10)
		for i := range errs {
			errs[i] = &Error{Kind: Transient}
		}
		call, _ := script(errs...)
		_ = Retrier{MaxRetries: 10, Base: base, Max: maxWait, Sleep: rec.sleep}.Do(context.Background(), call)
		if len(rec.waits) != 10 {
			t.Fatalf("waits = %d, want 10", len(rec.waits))
		}
		prev := base
		for i, w := range rec.waits {
			if w < base || w > maxWait || w > 3*prev {
				t.Fatalf("wait %d = %v outside [%v, min(3×%v, %v)]", i, w, base, prev, maxWait)
			}
			prev = w
		}
	}
}

func TestRetrierCancelDuringWaitReturnsPromptly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	call := func(context.Context) error { return &Error{Kind: Transient, Status: 503, Message: "busy"} }
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	err := Retrier{MaxRetries: 5, Base: time.Minute, Max: time.Hour}.Do(ctx, call) // real sleep
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Fatalf("Do took %v after cancel", elapsed)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want one wrapping context.Canceled", err)
	}
	var pe *Error
	if !errors.As(err, &pe) || pe.Status != 503 || pe.Attempts != 1 || pe.Kind != Transient {
		t.Fatalf("err = %#v, want the last 503 after 1 attempt", err)
	}
}

func TestRetrierCanceledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	call, calls := script()
	err := Retrier{}.Do(ctx, call)
	if *calls != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("calls = %d, err = %v; want 0 calls and context.Canceled", *calls, err)
	}
}

// TestRetrierRateLimitedSpendsNoRetry: rate-limited failures (429, 503
// with Retry-After) are sent again at once — the model's governor waits —
// without counting against MaxRetries, each reported to the trace; a real
// error after them still gets only its retries.
func TestRetrierRateLimitedSpendsNoRetry(t *testing.T) {
	limited := &Error{Kind: Transient, Status: 429, Message: "slow down", RateLimited: true}
	failing := &Error{Kind: Transient, Status: 503, Message: "overloaded"}
	script := []error{limited, limited, limited, limited, limited, failing, failing}
	calls, paced := 0, 0
	var waits []time.Duration
	r := Retrier{MaxRetries: 1, Sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }}
	ctx := WithTrace(context.Background(), &Trace{Paced: func(error) { paced++ }})
	err := r.Do(ctx, func(context.Context) error {
		e := script[calls]
		calls++
		return e
	})
	var pe *Error
	if !errors.As(err, &pe) || pe.Status != 503 || calls != 7 || paced != 5 || len(waits) != 1 {
		t.Fatalf("err %v after %d calls, %d paced, waits %v: want the 503 after 5 rate limits and 1 retry (7 calls, one wait)", err, calls, paced, waits)
	}
}

// TestRetrierRateLimitedBackstop: without a governor holding the server off,
// rate-limited attempts in a row still wait a backoff every pacedBackstop
// attempts, without spending a retry.
func TestRetrierRateLimitedBackstop(t *testing.T) {
	limited := &Error{Kind: Transient, Status: 429, Message: "slow down", RateLimited: true}
	calls := 0
	var waits []time.Duration
	r := Retrier{MaxRetries: 0, Sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }}
	err := r.Do(context.Background(), func(context.Context) error {
		if calls++; calls <= 2*pacedBackstop+1 {
			return limited
		}
		return nil
	})
	if err != nil || len(waits) != 2 || waits[0] < DefaultRetryBase {
		t.Fatalf("err %v, waits %v: want success after %d rate limits with 2 backoffs", err, waits, 2*pacedBackstop+1)
	}
}

// TestRetrierAttemptHook: the trace sees every request's outcome, and a
// hook that says stop ends the retries at once with that failure (the
// model's circuit opened: the row parks rather than spending its retries).
func TestRetrierAttemptHook(t *testing.T) {
	down := &Error{Kind: Transient, Message: "dial tcp: connection refused"}
	tests := []struct {
		name      string
		errs      []error
		stopAfter int // the hook says stop from this request on; 0 = never
		wantCalls int
		wantSeen  int
		wantErr   bool
	}{
		{name: "never stops", errs: []error{down, down}, wantCalls: 3, wantSeen: 3},
		{name: "stops at the first", errs: []error{down, down, down}, stopAfter: 1, wantCalls: 1, wantSeen: 1, wantErr: true},
		{name: "stops at the second", errs: []error{down, down, down}, stopAfter: 2, wantCalls: 2, wantSeen: 2, wantErr: true},
		{name: "a success is reported and returned", errs: nil, stopAfter: 1, wantCalls: 1, wantSeen: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var rec recorder
			call, calls := script(tc.errs...)
			seen := 0
			ctx := WithTrace(context.Background(), &Trace{Attempt: func(error) bool {
				seen++
				return tc.stopAfter > 0 && seen >= tc.stopAfter
			}})
			err := Retrier{MaxRetries: 4, Sleep: rec.sleep}.Do(ctx, call)
			if *calls != tc.wantCalls || seen != tc.wantSeen || (err != nil) != tc.wantErr {
				t.Fatalf("calls %d, seen %d, err %v; want %d, %d, err %v", *calls, seen, err, tc.wantCalls, tc.wantSeen, tc.wantErr)
			}
		})
	}
}
