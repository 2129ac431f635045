// Package engine turns the changes that replication reads into work, one
// file per question it answers:
//
//	engine.go    the events in (Begin, Change, Commit, Message, Reset), each
//	             handed to the part that answers it
//	rows.go      what a row change means for the rules of its table: keys,
//	             targets, per rule a decision
//	decide.go    the decision itself, with no I/O (table-tested)
//	calls.go     who does it: the result items and their calls (Caller)
//	route.go     where it goes: its position in the stream and its lane
//	template.go  what a prompt template reads of a row (unchanged TOAST)
//	config.go    configuration changes at their commit: reload, diff, recheck
//	backfills.go backfill workers and their pages, applied at their markers
//	switch.go    version switches and drops of side work, at their markers
//	watch.go     what pgoutput does not send: partitions, new source tables
//	retry.go     operators' retry requests; unpark.go: parked rows sent again
//
// The parts share one base (the connections, the rules, the router) and
// reach each other through small interfaces (reloader, backfiller,
// sideWork, sourceChecker, rowNotes). The workers the engine starts go
// through the Spawner it is given; it keeps no context.
//
// It is driven by one goroutine, the bridge's pipeline. It calls down into
// bridge/rules, bridge/cost, bridge/calls, bridge/backfill,
// bridge/switchover, bridge/reconcile, bridge/park, bridge/apply (Push and
// the row counts), bridge/track and bridge/work, and outside bridge/ into
// catalog, functions, metrics, provider/pace, replication, sink, state and
// internal/reconn; nothing below calls it.
//
// Layer: engine.
package engine
