// Package state owns every statement on the pgimageai.* tables: checkpoints
// (the slot's and its lanes'), errors rows and their resolution, backfill
// progress and its Batch API batches and answers (batch.go), usage, the
// bridge's own write-back transactions, retry requests, the caps and counts
// of open errors, the gaps a slot skipped (gap.go), the targets the bridge
// created, what the leader reports for status (models' pacing, lanes'
// pending changes), retention, and the rules and models as stored. sink, bridge and cmd/pgimageai call
// it; none of them writes SQL against those tables itself — the way pgx keeps
// the wire in pgproto3.
//
// The ops (Error, Resolve, BackfillProgress, …) implement sink.Op: they are
// queued in a lane's target transaction beside the results they belong with,
// so that results, errors and progress commit together.
//
// Layer: bookkeeping.
package state
