package functions

import (
	"errors"
	"fmt"

	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/value"
)

// Reason is a reason code of the function semantics, stored in
// pgimageai.errors.reason (value.Reason, named here for the callers).
type Reason = value.Reason

// The reason codes (value holds them, with the store's).
const (
	EmptyImage        = value.EmptyImage
	UnknownFormat     = value.UnknownFormat
	TooLarge          = value.TooLarge
	UnsupportedFormat = value.UnsupportedFormat
	ProviderError     = value.ProviderError
	BadResponse       = value.BadResponse
	InvalidRule       = value.InvalidRule
	BudgetExhausted   = value.BudgetExhausted
	TargetRefused     = value.TargetRefused
	// The reasons of an image held by reference in a store (SPEC §3).
	BadReference   = value.BadReference
	ImageNotFound  = value.ImageNotFound
	ImageForbidden = value.ImageForbidden
)

// Error is a function failure with its reason code. Detail is human readable
// and holds no secret; ImageBytes and ImageHead describe the image, where there
// was one, for the errors table.
type Error struct {
	Reason     Reason
	Detail     string
	Status     int    // HTTP status of a provider failure; 0 otherwise
	ImageBytes int    // length of the image; -1 when there was none
	ImageHead  []byte // first 16 bytes of the image
	Err        error  // the underlying error, e.g. a *provider.Error
}

func (e *Error) Error() string { return string(e.Reason) + ": " + e.Detail }

func (e *Error) Unwrap() error { return e.Err }

// ReasonOf returns the reason code carried by err, or "" when err carries none.
func ReasonOf(err error) Reason {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Reason
	}
	return ""
}

// Permanent reports whether err is a failure that the same call would give
// again: an unusable answer (bad_response) or a provider error that is not
// worth retrying (a 4xx other than 408, 409 and 429). A transient failure
// whose retries were spent is not permanent.
func Permanent(err error) bool {
	if ReasonOf(err) == BadResponse {
		return true
	}
	var pe *provider.Error
	return errors.As(err, &pe) && (pe.Kind == provider.Permanent || pe.Kind == provider.BadResponse)
}

// invalidRule returns an invalid_rule error with a formatted detail.
func invalidRule(format string, args ...any) *Error {
	return &Error{Reason: InvalidRule, Detail: fmt.Sprintf(format, args...), ImageBytes: -1}
}

// fromProvider classifies a provider failure: an unusable answer is
// bad_response, an input over the provider's limits too_large, anything
// else (HTTP error, retries spent, I/O) provider_error.
func fromProvider(model string, img []byte, err error) *Error {
	fe := &Error{Reason: ProviderError, ImageBytes: len(img), ImageHead: head(img), Err: err}
	var pe *provider.Error
	if errors.As(err, &pe) {
		fe.Status = pe.Status
		switch pe.Kind {
		case provider.BadResponse:
			fe.Reason = BadResponse
		case provider.TooLarge:
			fe.Reason = TooLarge
		}
	}
	fe.Detail = fmt.Sprintf("model %s: %v", model, err)
	return fe
}
