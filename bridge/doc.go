// Package bridge is the orchestration between replication and sink: it loads
// and validates the rules, matches each change to the rules of its table,
// calls the AI functions concurrently (bounded per model by the providers and
// overall by a byte budget), de-duplicates identical work through a bounded
// cache, and routes every effect to the lane of its target table, which
// writes it in source order, one target transaction per chunk. The slot is
// confirmed (acks flow back to replication) only at what every lane made
// durable.
//
// One INSERT, from the WAL to the target, crosses five files:
//
//  1. replication/decode.go turns pgoutput's Insert into a *replication.Change.
//  2. engine.go (handle, change) finds the rules of its table and asks, per
//     rule, what to do;
//  3. decide.go answers, with no I/O: a call, a NULL result, or nothing;
//     engine.go then starts the call and emits the item to its lane (emit).
//  4. lane.go writes the ready prefix of the lane as a batch of sink ops,
//     with the lane's checkpoint, and marks the items done in the tracker;
//  5. sink/writer.go runs that batch in one target transaction.
//
// Everything on pgimageai.* tables — checkpoints, errors, backfills, usage —
// is written through package state; the configuration as the WAL shows it is
// compiled into an immutable ruleSet (ruleset.go) swapped in at the commit
// that changes it (live.go); backfills read through a pageSource
// (backfill.go), and a model with batch_api backfills through the provider's
// batch API first (batchapi.go); the slot's position is the tracker's (tracker.go), stored by
// the checkpointer (checkpoint.go).
package bridge
