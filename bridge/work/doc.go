// Package work holds the unit of work that the engine makes, the cost
// control charges and the lanes apply: an Item (one effect of a source
// change on one target table), the Call it may wait for, and the Key that
// identifies identical work. It owns no goroutine and does no I/O; it sits
// below bridge/engine, bridge/cost and bridge/apply, which all handle these
// values.
//
// Layer: parts.
package work
