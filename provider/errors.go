package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	// choices, an empty vector, a wrong dimension, invalid JSON, an answer
	// over a bound.
	BadResponse
	// TooLarge means the input is over a limit of the provider (the local
	// provider's decoding limits); it is refused before any work and never
	// succeeds when retried.
	TooLarge
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
	case TooLarge:
		return "too_large"
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
	// RateLimited marks a Transient failure by which the server asked to
	// slow down: a 429 (other than a quota exhausted for good), or a 503
	// with Retry-After. It is a pace signal for the model (provider/pace),
	// not a failure of the row: the Retrier sends the request again without
	// spending a retry.
	RateLimited bool
	// Responded marks a failure after the server's answer began (its
	// status came, its body was cut): the server is up, whatever the
	// request's fate (see Unreachable).
	Responded bool
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

// Unreachable reports whether err is a failure that says the provider is
// not answering at all, rather than anything about the request: no answer
// (a refused or reset connection, a timeout, any I/O error: Status 0) or a
// 5xx that is not a rate limit. A body cut after the status came is not. A model whose requests all fail so is in an
// outage; see internal/circuit. A cancelled request is not unreachable.
func Unreachable(err error) bool {
	var pe *Error
	if !errors.As(err, &pe) || pe.Kind != Transient || pe.RateLimited || pe.Responded {
		return false
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	return pe.Status == 0 || pe.Status >= 500 || pe.Status == 408
}

// StatusKind classifies an HTTP status per the provider contract: 408, 409, 429 and 5xx are
// transient; every other 4xx is permanent.
func StatusKind(status int) Kind {
	switch {
	case status == 408, status == 409, status == 429, status >= 500:
		return Transient
	default:
		return Permanent
	}
}

// RateLimitedStatus reports whether an answer of status, with a Retry-After
// of retryAfter and a provider error code (OpenAI's error.code or
// error.type), asks to slow down rather than fails: a 429 other than
// OpenAI's insufficient_quota ("You exceeded your current quota", which
// waiting does not cure), or a 503 with Retry-After.
func RateLimitedStatus(status int, retryAfter time.Duration, code string) bool {
	switch {
	case status == 429:
		return !QuotaExhausted(status, code)
	case status == 503:
		return retryAfter > 0
	}
	return false
}

// QuotaExhausted reports whether a 429 says the account's quota is spent for
// good: OpenAI's error code insufficient_quota
// (https://platform.openai.com/docs/guides/error-codes, "429 - You exceeded
// your current quota"). Such a 429 is a Permanent failure of the row.
func QuotaExhausted(status int, code string) bool {
	return status == 429 && code == "insufficient_quota"
}

// Errorf returns an *Error of kind k with a formatted message.
func Errorf(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Message: fmt.Sprintf(format, args...)}
}

// imageRefusals are phrases servers use when they cannot decode or load an
// image: llama.cpp's mtmd ("Failed to load image or audio file"), Pillow
// behind vLLM and other Python servers ("cannot identify image file"), and
// the usual wordings of decoders.
var imageRefusals = []string{
	"failed to load image",
	"cannot identify image file",
	"could not decode image",
	"cannot decode image",
	"unable to decode image",
	"failed to decode image",
	"unsupported image format",
	"invalid image",
}

// ImageRefused reports whether a server's error message says that it could
// not decode or load an image it was sent.
func ImageRefused(message string) bool {
	m := strings.ToLower(message)
	for _, p := range imageRefusals {
		if strings.Contains(m, p) {
			return true
		}
	}
	return false
}

// ClassifyStatus is StatusKind, except that a 500 whose message says that
// the image could not be decoded is Permanent: llama-server answers an image
// its decoder cannot read (a WebP) with 500, and the same bytes would fail
// every retry.
func ClassifyStatus(status int, message string) Kind {
	if status == 500 && ImageRefused(message) {
		return Permanent
	}
	return StatusKind(status)
}

// InputRefused reports whether err is a failure that a single input of a
// request can cause: a Permanent status other than those that concern the
// request as a whole (401, 403, 404, 405, 407). A batch that fails so is
// worth splitting to find the input; one failing with 401 is not.
func InputRefused(err error) bool {
	var pe *Error
	if !errors.As(err, &pe) || pe.Kind != Permanent || pe.Status < 400 {
		return false
	}
	switch pe.Status {
	case 401, 403, 404, 405, 407:
		return false
	}
	return true
}
