package value

// Reason is a reason code of the function semantics (SPEC §3), stored in
// pgimageai.errors.reason.
type Reason string

// The reason codes.
const (
	EmptyImage        Reason = "empty_image"
	UnknownFormat     Reason = "unknown_format"
	TooLarge          Reason = "too_large"
	UnsupportedFormat Reason = "unsupported_format"
	ProviderError     Reason = "provider_error"
	BadResponse       Reason = "bad_response"
	InvalidRule       Reason = "invalid_rule"
	// BudgetExhausted: the model's max_calls_per_day or max_tokens_per_day
	// is spent for the UTC day; no call was made. Retried by itself after
	// the day rolls over, or by pgimageai retry --reason budget_exhausted.
	BudgetExhausted Reason = "budget_exhausted"
	// TargetRefused: the target table refused a change whatever it held —
	// a delete or move that a constraint forbids (another table's foreign
	// key), a NULL that a NOT NULL column refuses; the target row is left
	// as it was and the stream goes on.
	TargetRefused Reason = "target_refused"

	// The reasons of an image held by reference in a store.

	// BadReference: a reference outside its store, unparseable, or to an
	// address the store does not allow; nothing was fetched.
	BadReference Reason = "bad_reference"
	// ImageNotFound: the referenced object does not exist.
	ImageNotFound Reason = "image_not_found"
	// ImageForbidden: the referenced object is not readable.
	ImageForbidden Reason = "image_forbidden"
	// StoreUnavailable: the store did not answer (transient: the row is
	// parked, not failed).
	StoreUnavailable Reason = "store_unavailable"
)

// HoldingReasons are the reasons of a side rule's errors rows that hold a
// switch: the new version failed the row (provider_error, bad_response),
// its daily budget refused it (budget_exhausted: retried on the next UTC
// day), or the target refused it (target_refused). An image's own fault
// (empty_image, unknown_format, too_large, unsupported_format) holds
// nothing: the live column holds NULL for it too.
var HoldingReasons = []Reason{ProviderError, BadResponse, BudgetExhausted, TargetRefused}
