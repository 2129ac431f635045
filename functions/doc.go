// Package functions implements the two SQL-configured AI functions,
// AI_IMAGE_COMPLETE(model, image, prompt) → text and
// AI_IMAGE_EMBED(model, image) → real[], with these semantics: a NULL
// image gives a NULL result without a provider call; an empty, unrecognised,
// too large or unsupported image never reaches a provider and yields an *Error
// carrying its Reason; provider failures are classified as provider_error or
// bad_response.
//
// In the flow it sits between the orchestration of changes and rules (which
// decides what to call and when) and the providers (which it calls through
// their capability interfaces). It keeps no state across calls.
//
// Layer: semantics.
package functions
