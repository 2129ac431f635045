// Package bridge wires the orchestration between replication and sink: it
// takes the slot's leader lock (bridge/leader), prepares one leadership —
// connections, the rules as the WAL shows them, the slot, the lanes, the
// engine (leadership.go) — and runs its pipeline (pipeline.go) under one
// supervisor (internal/supervise), which starts every goroutine of the
// leadership and has joined them all, soft stop then hard, before the next
// leadership starts: the stream's events go to
// the engine, the lanes write, the checkpointer stores what the tracker
// confirms, and acks flow back to replication only once stored. Before
// anything streams it finds whether the slot skipped changes since the
// stored checkpoint — gone, or ahead of it — and then starts over from the
// rows as they are (gap.go); it also recovers an invalidated slot on
// request (recoverslot.go). Beside the pipeline, while it leads, it reports the
// models' pacing and the lanes' pending changes for status and the log
// (pacewatch.go) and deletes old
// bookkeeping rows (retention.go). It holds no decision of its own.
//
// The packages below it (internal/archtest holds the rules of who may
// import whom):
//
//	engine    changes → decisions → calls → items routed to lanes;
//	          configuration changes at their commit; the markers it placed
//	          (backfill pages, switches, new tables, retries, parked rows)
//	calls     starts the calls of items, asking cost first; per-model workers
//	backfill  reads existing rows in keyset pages; the Batch API
//	switchover watches a rule's version switch: side work done, failed
//	          rows, obstacles, the shadow column's indexes built
//	apply     lanes: items → sink ops, one target transaction per chunk,
//	          in source order per target table; the checkpointer
//	reconcile repairs a rule's drift: deletes orphans, queues missing rows
//	park      parks the rows of a model whose endpoint is down, and drains them
//	cost      the byte budget, daily caps, the result cache, stored inputs
//	rules     rules (what the user configured and what was derived), their
//	          compilation and the WAL's view of them (a reload returns a
//	          diff), templates, how a relation fits its rules
//	work      the unit of work: Item, Call, Key, and the Rule an item names
//	track     the slot's position: what every lane made durable
//	leader    the slot's leader lock
//
// One INSERT, from the WAL to the target, crosses these files, every one
// named (18; a DELETE crosses the 11 not marked †):
//
//  1. replication/decode.go turns pgoutput's Insert into a
//     *replication.Change; bridge/pipeline.go hands it to Engine.Handle
//     (engine/engine.go), which hands a row change to the rules of its table.
//  2. engine/rows.go decodes the row's key and asks, per rule, what the
//     change means: engine/decide.go† answers with no I/O — a call, a NULL
//     result, or nothing.
//  3. engine/calls.go† starts the call through calls/calls.go†, which
//     charges the byte budget (cost/budget.go†), asks the result cache
//     (cost/cache.go†) and the daily cap (cost/daily.go†), and queues it on
//     its model's workers (calls/workers.go†).
//  4. engine/route.go places the item at its position in the stream and
//     pushes it to the lane of its target table.
//  5. apply/lane.go takes the lane's ready prefix; apply/lanewrite.go
//     writes it, turned into sink ops by apply/batch.go, through
//     sink/writer.go, in one target transaction with the lane's checkpoint.
//  6. The lane tells track/track.go the items are durable; the checkpointer
//     (apply/checkpoint.go) stores the position past every transaction all
//     lanes have written, and only then confirms it to the slot.
//
// A DELETE takes the same way without a call: engine/rows.go makes one
// Delete item per target table (a write-back target's is a Forget: its
// rows are the source's own), which route.go places and the lane writes.
//
// Everything on pgimageai.* tables — checkpoints, errors, backfills, usage —
// is written through package state.
//
// Layer: bridge.
package bridge
