package provider

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestClassifyStatus(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		message string
		want    Kind
	}{
		// llama-server b11669, POST /v1/embeddings with a WebP.
		{name: "llama.cpp undecodable image", status: 500, message: "Failed to load image or audio file", want: Permanent},
		// Pillow's UnidentifiedImageError behind vLLM.
		{name: "Pillow", status: 500, message: "cannot identify image file <_io.BytesIO object at 0x7f>", want: Permanent},
		{name: "other 500", status: 500, message: "CUDA out of memory", want: Transient},
		{name: "502 naming an image is still transient", status: 502, message: "failed to load image", want: Transient},
		{name: "503", status: 503, message: "", want: Transient},
		{name: "429", status: 429, message: "rate limited", want: Transient},
		{name: "400", status: 400, message: "Failed to load image or audio file", want: Permanent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ClassifyStatus(tt.status, tt.message); got != tt.want {
				t.Fatalf("ClassifyStatus(%d, %q) = %v, want %v", tt.status, tt.message, got, tt.want)
			}
		})
	}
}

func TestInputRefused(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "400", err: &Error{Kind: Permanent, Status: 400}, want: true},
		{name: "413 too large", err: &Error{Kind: Permanent, Status: 413}, want: true},
		{name: "422", err: &Error{Kind: Permanent, Status: 422}, want: true},
		{name: "500 undecodable image", err: &Error{Kind: ClassifyStatus(500, "Failed to load image"), Status: 500}, want: true},
		{name: "wrapped", err: fmt.Errorf("batch: %w", &Error{Kind: Permanent, Status: 400}), want: true},
		{name: "401 concerns every input", err: &Error{Kind: Permanent, Status: 401}},
		{name: "403", err: &Error{Kind: Permanent, Status: 403}},
		{name: "404", err: &Error{Kind: Permanent, Status: 404}},
		{name: "transient 503", err: &Error{Kind: Transient, Status: 503}},
		{name: "bad response", err: &Error{Kind: BadResponse}},
		{name: "permanent without status", err: &Error{Kind: Permanent, Message: "encode request"}},
		{name: "not a provider error", err: errors.New("x")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := InputRefused(tt.err); got != tt.want {
				t.Fatalf("InputRefused(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestRateLimitedStatus(t *testing.T) {
	tests := []struct {
		status     int
		retryAfter time.Duration
		code       string
		limited    bool
		quota      bool
	}{
		{status: 429, limited: true},
		{status: 429, retryAfter: time.Second, code: "rate_limit_exceeded", limited: true},
		{status: 429, code: "insufficient_quota", quota: true},
		{status: 503, retryAfter: time.Second, limited: true},
		{status: 503},
		{status: 500, retryAfter: time.Second},
		{status: 400, code: "insufficient_quota"},
	}
	for _, tt := range tests {
		if got := RateLimitedStatus(tt.status, tt.retryAfter, tt.code); got != tt.limited {
			t.Errorf("RateLimitedStatus(%d, %s, %q) = %v, want %v", tt.status, tt.retryAfter, tt.code, got, tt.limited)
		}
		if got := QuotaExhausted(tt.status, tt.code); got != tt.quota {
			t.Errorf("QuotaExhausted(%d, %q) = %v, want %v", tt.status, tt.code, got, tt.quota)
		}
	}
}

// TestUnreachable: what says a model is not answering at all, as opposed to
// an answer about the request.
func TestUnreachable(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "refused", err: &Error{Kind: Transient, Message: "dial tcp 127.0.0.1:1: connect: connection refused"}, want: true},
		{name: "timeout", err: &Error{Kind: Transient, Message: "timeout", Err: context.DeadlineExceeded}, want: true},
		{name: "503", err: &Error{Kind: Transient, Status: 503}, want: true},
		{name: "500", err: &Error{Kind: Transient, Status: 500}, want: true},
		{name: "408", err: &Error{Kind: Transient, Status: 408}, want: true},
		{name: "409", err: &Error{Kind: Transient, Status: 409}, want: false},
		{name: "429", err: &Error{Kind: Transient, Status: 429, RateLimited: true}, want: false},
		{name: "503 with Retry-After", err: &Error{Kind: Transient, Status: 503, RetryAfter: time.Second, RateLimited: true}, want: false},
		{name: "400", err: &Error{Kind: Permanent, Status: 400}, want: false},
		{name: "500 image refused", err: &Error{Kind: Permanent, Status: 500}, want: false},
		{name: "bad response", err: &Error{Kind: BadResponse}, want: false},
		{name: "cancelled", err: &Error{Kind: Transient, Err: context.Canceled}, want: false},
		{name: "not a provider error", err: errors.New("x"), want: false},
		{name: "a body cut after its status", err: &Error{Kind: Transient, Message: "unexpected EOF", Responded: true}, want: false},
		{name: "wrapped", err: fmt.Errorf("call: %w", &Error{Kind: Transient, Status: 502}), want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Unreachable(tc.err); got != tc.want {
				t.Errorf("Unreachable(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
