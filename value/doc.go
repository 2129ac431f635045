// Package value holds the small types every room of pgimageai shares: a
// position in the stream (LSN, Position), the reason codes of the errors
// table (Reason), the states the bookkeeping tables hold (BackfillState,
// SwitchState, SwitchRequest, SwitchOutcome, EndpointState, BatchStatus) and
// a model as stored (Model).
//
// Layer: value (the leaf). It imports the standard library only, so that any
// package may import it; a type moves here when two rooms that must not
// import each other both need it. PostgreSQL's own vocabulary (SQLSTATEs)
// lives in internal/pgerr, beside the helpers that read it off an error.
package value
