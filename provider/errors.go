package provider

import (
	"errors"
	"fmt"
	"time"
)

// Kind classifies a provider failure.
type Kind uint8

const (
	// Transient failures (I/O, timeouts, 408, 409, 429, 5xx) may succeed when retried.
	Transient Kind = iota + 1
	// Permanent failures (other 4xx, invalid requests) never succeed when retried.
	Permanent
	// BadResponse means the provider answered but the answer is unusable: no
	// choices, an empty vector, a wrong dimension, invalid JSON.
	BadResponse
)

// String returns the kind's name.
func (k Kind) String() string {
	switch k {
	case Transient:
		return "transient"
	case Permanent:
		return "permanent"
	case BadResponse:
		return "bad_response"
	}
	return "unknown"
}

// Error is the error every provider returns for a failed call. Message never
// contains an API key.
type Error struct {
	Kind       Kind
	Status     int           // HTTP status; 0 when no response was received
	Message    string        // what went wrong, from the provider's answer where it gave one
	RetryAfter time.Duration // the server's Retry-After, when it sent one
	Attempts   int           // how many requests were made
	Err        error         // the underlying error, if any
}

func (e *Error) Error() string {
	var s string
	if e.Status != 0 {
		s = fmt.Sprintf("HTTP %d: %s", e.Status, e.Message)
	} else {
		s = e.Message
	}
	if e.Attempts > 1 {
		s += fmt.Sprintf(" (after %d attempts)", e.Attempts)
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether err is a provider failure worth retrying.
func Retryable(err error) bool {
	var pe *Error
	return errors.As(err, &pe) && pe.Kind == Transient
}

// StatusKind classifies an HTTP status per SPEC §4: 408, 409, 429 and 5xx are
// transient; every other 4xx is permanent.
func StatusKind(status int) Kind {
	switch {
	case status == 408, status == 409, status == 429, status >= 500:
		return Transient
	default:
		return Permanent
	}
}

// Errorf returns an *Error of kind k with a formatted message.
func Errorf(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Message: fmt.Sprintf(format, args...)}
}
