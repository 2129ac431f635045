// Package work holds the unit of work that the engine makes, the cost
// control charges and the lanes apply: an Item (one effect of a source
// change on one target table), the Call it may wait for, the Key that
// identifies identical work, and the Rule an item names (what the lane and
// the call key need of a compiled rule). It owns no goroutine and does no
// I/O; it sits below bridge/rules, bridge/engine, bridge/cost and
// bridge/apply, which all handle these values, and imports only functions,
// sink, state, replication and bridge/track.
//
// Layer: parts.
package work
