// Package switchover watches the switch of a rule's version: while the
// side rule computes the new version into the shadow column, a Watcher
// (watch.go) reads what the switch waits for — the side rule's backfill
// done, no failed rows (or an operator's force), nothing that would stop
// the switch transaction (a view on the live column, a role that does not
// own the table) — records it for status, builds the shadow column's
// indexes (CREATE INDEX CONCURRENTLY) and then tells the engine that the
// switch is ready, or that an operator asked to abort it. The engine places
// a marker message in the WAL (Emit, marker.go) and switches at the
// marker, in the lane of the target table, in one transaction.
//
// It sits below bridge/engine, which starts and stops watchers and reads
// their reports; of the bridge it imports bridge/rules only, and below it
// sink, state and catalog.
//
// Layer: parts.
package switchover
