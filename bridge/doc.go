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
//	engine    changes → decisions → items; configuration changes at their
//	          commit; backfill pages and retry requests applied in the stream
//	calls     starts the calls of items, asking cost first; per-model workers
//	backfill  reads existing rows in keyset pages; the Batch API
//	switchover watches a rule's version switch: side work done, failed
//	          rows, obstacles, the shadow column's indexes built
//	apply     lanes: items → sink ops, one target transaction per chunk,
//	          in source order per target table; the checkpointer
//	reconcile repairs a rule's drift: deletes orphans, queues missing rows
//	park      parks the rows of a model whose endpoint is down, and drains them
//	cost      the byte budget, daily caps, the result cache, stored inputs
//	rules     rules, their compilation and the WAL's view of them (a reload
//	          returns a diff), templates, how a relation fits its rules
//	work      the unit of work: Item, Call, Key
//	track     the slot's position: what every lane made durable
//	leader    the slot's leader lock
//
// One INSERT, from the WAL to the target, takes six steps; the files named
// are every file of the bridge it crosses, besides the cost package:
//
//  1. replication/decode.go turns pgoutput's Insert into a
//     *replication.Change, which pipeline.go hands to Engine.Handle.
//  2. engine/engine.go finds the rules of its table (change) and asks, per
//     rule, what to do: engine/decide.go answers with no I/O — a call, a
//     NULL result, or nothing.
//  3. calls/calls.go starts the call: it charges the byte budget, compares
//     the stored input and asks the cache and the daily cap (all in cost),
//     then queues it on its model's workers; engine/engine.go emits the
//     item to its lane (apply.Lanes.Push).
//  4. apply/lane.go takes the ready prefix of the lane; apply/lanewrite.go
//     writes it, turned into sink ops by apply/batch.go, with the lane's
//     checkpoint,
//  5. through sink/writer.go, in one target transaction;
//  6. then the lane tells track/track.go that the items are durable; the
//     checkpointer (apply/checkpoint.go) stores the position past every
//     transaction all lanes have written, and only then confirms it to the
//     slot.
//
// Everything on pgimageai.* tables — checkpoints, errors, backfills, usage —
// is written through package state.
//
// Layer: bridge.
package bridge
