package provider

import (
	"context"
	"testing"
	"time"
)

func TestRetrierReportsRetriesToTrace(t *testing.T) {
	transient := &Error{Kind: Transient, Status: 503, Message: "overloaded"}
	permanent := &Error{Kind: Permanent, Status: 400, Message: "bad"}
	tests := []struct {
		name        string
		maxRetries  int
		errs        []error
		wantRetries []int // attempt numbers reported
	}{
		{"success at once", 3, nil, nil},
		{"two transient then success", 3, []error{transient, transient}, []int{1, 2}},
		{"retries spent", 1, []error{transient, transient, transient}, []int{1}},
		{"permanent is not retried", 3, []error{permanent}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []int
			var waits []time.Duration
			ctx := WithTrace(context.Background(), &Trace{Retry: func(attempt int, err error, wait time.Duration) {
				if err == nil {
					t.Error("Retry called without the error")
				}
				got = append(got, attempt)
				waits = append(waits, wait)
			}})
			rec := &recorder{}
			call, _ := script(tt.errs...)
			_ = Retrier{MaxRetries: tt.maxRetries, Sleep: rec.sleep}.Do(ctx, call)
			if len(got) != len(tt.wantRetries) {
				t.Fatalf("retries reported %v, want %v", got, tt.wantRetries)
			}
			for i := range got {
				if got[i] != tt.wantRetries[i] || waits[i] != rec.waits[i] {
					t.Errorf("retry %d: attempt %d wait %s, want attempt %d wait %s", i, got[i], waits[i], tt.wantRetries[i], rec.waits[i])
				}
			}
		})
	}
}

func TestContextTraceAbsent(t *testing.T) {
	if tr := ContextTrace(context.Background()); tr != nil {
		t.Fatalf("ContextTrace of a bare context = %v, want nil", tr)
	}
	var tr *Trace
	tr.retry(1, nil, 0) // a nil Trace ignores reports
}
