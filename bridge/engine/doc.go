// Package engine turns the changes that replication reads into work: for
// each row change and rule it decides, without I/O, what to do (decide.go),
// reads what the decision needs, starts the calls through the cost control
// (calls.go) on their model's workers (workers.go), and emits each effect
// as an item to the lane of its target table, at its position in the
// stream. It applies the configuration changes that the WAL shows at their
// commit (config.go: a reload returns a diff that the engine applies),
// coordinates backfills and applies their pages where their markers appear
// (backfills.go), reprocesses rows on an operator's retry request
// (retry.go), and switches a rule's live column to its new version at a
// marker it placed in the WAL once the side work is ready (switch.go): the
// switch goes to the lane as one item, written in one transaction.
//
// It is driven by one goroutine, the bridge's pipeline. It calls down into
// bridge/rules, bridge/cost, bridge/calls, bridge/backfill,
// bridge/switchover, bridge/reconcile, bridge/park, bridge/apply (Push and
// the row counts), bridge/track and bridge/work; nothing below calls it.
//
// Layer: engine.
package engine
