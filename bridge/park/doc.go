// Package park holds the rows of a model that is down (an outage, told by
// internal/circuit) until it answers again: it knows which rules have
// parked rows (so lanes delete a row's parked row when they write newer
// work for it), and its Drainer sends the parked rows again — as one probe
// row at a time while the model is down, every one in order of arrival once
// it is up — by placing a marker message in the source's WAL, at whose
// position the engine reads a page of them (pgimageai.parked and the
// source rows as they are then) and routes them like any change.
//
// It also stores each model's circuit in pgimageai.model_health for
// status, logs ONE warning when a model goes down and one when it comes
// back, and reports both for metrics.
//
// It sits beside bridge/engine, which takes the markers (Drainer.Take) on
// its goroutine; bridge/apply asks Rules. It calls down into state,
// internal/circuit and bridge/work.
//
// Layer: parts.
package park
