package bridge

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/state"
)

// gapCause says whether the slot skipped changes since the checkpoint cp
// (found: one is stored), and why: state.GapSlotMissing, state.GapSlotAhead,
// or "" when it did not. db is the source database, for the slot's check.
//
// A slot found ahead counts only when cp bounds the slot: the bridge
// confirms the slot only up to a stored checkpoint (apply.Checkpointer), so
// a slot ahead of it was moved by something else. A checkpoint of an older
// bridge, which confirmed first and stored within a second, does not tell.
// A slot that cannot stream is not a gap: EnsureSlot reports it with what to
// do (pgimageai recover-slot).
func gapCause(cp state.Checkpoint, found bool, slot replication.Slot, slotFound bool, db string) string {
	switch {
	case !found || cp.LSN == 0:
		return "" // a first start: every rule backfills as a new one anyway
	case !slotFound:
		return state.GapSlotMissing
	case slot.Check(db) != nil:
		return ""
	case cp.BoundsSlot && slot.ConfirmedFlushLSN > cp.LSN:
		return state.GapSlotAhead
	}
	return ""
}

// closeGap finds out, before anything streams, whether the slot skipped
// changes since the stored checkpoint: it was created anew after it had
// gone (dropped by hand, a failover to a standby that had no copy of it, a
// restore), or it stands ahead of the checkpoint (advanced by hand, a
// restore of the target, a failover to a standby whose copy was ahead). The
// rows changed in between were never seen. Then it starts over from the
// rows as they are, the way pgimageai recover-slot does, and records the gap
// in pgimageai.slot_gaps for status and the log:
//
//   - a missing slot is created first (its publication too, if that is gone),
//     so that every change from its consistent point on is streamed;
//   - in one target transaction the checkpoint moves to the slot's position
//     and every enabled rule of the group loses its backfill state, so that
//     it backfills at this start — the stored results (pgimageai.results)
//     spare the calls of rows computed before;
//   - the results of source rows deleted meanwhile are deleted
//     (sink.DeleteOrphans), and the gap marked cleaned. A gap left uncleaned
//     by a crash is cleaned at the next start.
//
// It returns the checkpoint to stream from.
func (b *Bridge) closeGap(ctx context.Context, src, tgt *pgx.Conn) (replication.LSN, error) {
	cfg := b.cfg
	cp, found, err := state.ReadCheckpoint(ctx, tgt, cfg.Slot)
	if err != nil {
		return 0, fmt.Errorf("%w (run pgimageai migrate first)", err)
	}
	slot, slotFound, err := replication.ReadSlot(ctx, src, cfg.Slot)
	if err != nil {
		return 0, err
	}
	var db string
	if err := src.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		return 0, fmt.Errorf("slot %s: %w", cfg.Slot, err)
	}
	cause := gapCause(cp, found, slot, slotFound, db)
	group := rules.GroupOrDefault(cfg.Group)
	if cause == "" {
		return cp.LSN, b.cleanGaps(ctx, src, tgt, group)
	}
	if cause == state.GapSlotMissing {
		// Should anything stop the start between here and RecordGap, the
		// next start finds the new slot ahead of a checkpoint that bounds
		// it — a gap still, even when an older bridge stored it.
		if err := state.BoundSlot(ctx, tgt, cfg.Slot); err != nil {
			return 0, err
		}
		if err := ensurePublication(ctx, src, cfg.Publication); err != nil {
			return 0, err
		}
		if err := replication.EnsureSlot(ctx, src, cfg.Slot); err != nil {
			return 0, err
		}
		if slot, _, err = replication.ReadSlot(ctx, src, cfg.Slot); err != nil {
			return 0, err
		}
	}
	enabled, err := enabledRules(ctx, src, group)
	if err != nil {
		return 0, err
	}
	gap := state.Gap{Slot: cfg.Slot, Cause: cause, Checkpoint: cp.LSN, SlotLSN: slot.ConfirmedFlushLSN, Rules: []string{}}
	for _, r := range enabled {
		gap.Rules = append(gap.Rules, r.Name)
	}
	err = pgx.BeginFunc(ctx, tgt, func(tx pgx.Tx) error {
		_, err := state.RecordGap(ctx, tx, gap)
		return err
	})
	if err != nil {
		return 0, err
	}
	cfg.Metrics.SlotGap(cause)
	cfg.Logger.Warn("the slot skipped changes since the checkpoint: the rows changed in between were never streamed, so every enabled rule backfills from the rows as they are now "+
		"(rows whose result is stored cost no provider call) and the results of rows deleted meanwhile are deleted",
		"slot", cfg.Slot, "cause", cause, "checkpoint", cp.LSN.String(), "slot_lsn", slot.ConfirmedFlushLSN.String(), "rules", len(gap.Rules))
	return slot.ConfirmedFlushLSN, b.cleanGaps(ctx, src, tgt, group)
}

// cleanGaps deletes, for each gap of the slot not cleaned yet, the target
// rows whose source row is gone, and marks the gap cleaned.
func (b *Bridge) cleanGaps(ctx context.Context, src, tgt *pgx.Conn, group string) error {
	gaps, err := state.Gaps(ctx, tgt, b.cfg.Slot, time.Now())
	if err != nil {
		return err
	}
	var pending []state.Gap
	for _, g := range gaps {
		if g.CleanedAt == nil {
			pending = append(pending, g)
		}
	}
	if len(pending) == 0 {
		return nil
	}
	enabled, err := enabledRules(ctx, src, group)
	if err != nil {
		return err
	}
	cleaned, err := deleteOrphans(ctx, src, tgt, enabled)
	if err != nil {
		return fmt.Errorf("delete the results of rows deleted while the slot skipped changes: %w", err)
	}
	var deleted int64
	for _, c := range cleaned {
		deleted += c.Deleted
		if c.Deleted > 0 {
			b.cfg.Logger.Info("deleted the results of source rows deleted while the slot skipped changes", "table", c.Table, "rows", c.Deleted)
		}
	}
	for _, g := range pending {
		if err := state.GapCleaned(ctx, tgt, g.ID, deleted); err != nil {
			return err
		}
		deleted = 0 // counted on the newest gap only
	}
	return nil
}

// ensurePublication creates the publication when it is gone, publishing
// the configuration tables only: the rules' tables are added when the rules
// load. A slot must not be older than its publication (pgoutput reads the
// publication as of each change).
func ensurePublication(ctx context.Context, src *pgx.Conn, name string) error {
	var exists bool
	if err := src.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_publication WHERE pubname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("read publication %s: %w", name, err)
	}
	if exists {
		return nil
	}
	return replication.SyncPublication(ctx, src, name, []pgx.Identifier{{"pgimageai", "rules"}, {"pgimageai", "models"}})
}
