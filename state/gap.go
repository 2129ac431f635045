package state

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/value"
)

// Gaps in the stream: a slot that skipped changes (pgimageai.slot_gaps).

// Gap causes, as pgimageai.slot_gaps.cause stores them.
const (
	// GapSlotMissing: the slot was gone while a checkpoint was stored —
	// dropped, or a failover to a standby without a copy, or a restore —
	// and was created anew.
	GapSlotMissing = "slot_missing"
	// GapSlotAhead: the slot's confirmed_flush_lsn was past the stored
	// checkpoint, which the bridge never does: it was advanced by hand, or a
	// standby's copy of it got ahead of the target's checkpoint.
	GapSlotAhead = "slot_ahead"
)

// Gap is one row of pgimageai.slot_gaps.
type Gap struct {
	ID         int64
	Slot       string
	DetectedAt time.Time
	Cause      string
	Checkpoint value.LSN // where the bridge had stopped
	SlotLSN    value.LSN // where the slot stood, or was created
	Rules      []string  // the enabled rules that backfill
	// OrphansDeleted counts the target rows deleted because their source
	// row was gone; nil until CleanedAt is set.
	OrphansDeleted *int64
	CleanedAt      *time.Time
}

// RecordGap records g in tx and makes the bridge start over at g.SlotLSN:
// the slot's checkpoint becomes g.SlotLSN (whether it was ahead or behind:
// after a restore it may be either), its lane checkpoints are deleted, and
// the backfill states of g.Rules are deleted, so that each of them backfills
// at the next start. It returns the gap's ID.
func RecordGap(ctx context.Context, tx pgx.Tx, g Gap) (int64, error) {
	_, err := tx.Exec(ctx, `INSERT INTO pgimageai.checkpoints AS c (slot, lsn, updated_at, bounds_slot) VALUES ($1, $2, now(), true)
ON CONFLICT (slot) DO UPDATE SET lsn = EXCLUDED.lsn, updated_at = EXCLUDED.updated_at, bounds_slot = true`, g.Slot, g.SlotLSN)
	if err != nil {
		return 0, fmt.Errorf("record gap of slot %s: %w", g.Slot, err)
	}
	if _, err := tx.Exec(ctx, "DELETE FROM pgimageai.lane_checkpoints WHERE slot = $1", g.Slot); err != nil {
		return 0, fmt.Errorf("record gap of slot %s: %w", g.Slot, err)
	}
	if _, err := tx.Exec(ctx, "DELETE FROM pgimageai.backfills WHERE rule = ANY($1)", g.Rules); err != nil {
		return 0, fmt.Errorf("record gap of slot %s: %w", g.Slot, err)
	}
	var id int64
	err = tx.QueryRow(ctx, `INSERT INTO pgimageai.slot_gaps (slot, cause, checkpoint, slot_lsn, rules) VALUES ($1, $2, $3, $4, $5) RETURNING id`,
		g.Slot, g.Cause, g.Checkpoint, g.SlotLSN, g.Rules).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("record gap of slot %s: %w", g.Slot, err)
	}
	return id, nil
}

// BoundSlot marks the slot's stored checkpoint as one the slot may not be
// ahead of (checkpoints.bounds_slot).
func BoundSlot(ctx context.Context, conn *pgx.Conn, slot string) error {
	if _, err := conn.Exec(ctx, "UPDATE pgimageai.checkpoints SET bounds_slot = true WHERE slot = $1", slot); err != nil {
		return fmt.Errorf("checkpoint of slot %s: %w", slot, err)
	}
	return nil
}

// GapCleaned records that the results of the source rows deleted during gap
// id are deleted: deleted target rows.
func GapCleaned(ctx context.Context, conn *pgx.Conn, id, deleted int64) error {
	if _, err := conn.Exec(ctx, "UPDATE pgimageai.slot_gaps SET orphans_deleted = $2, cleaned_at = now() WHERE id = $1", id, deleted); err != nil {
		return fmt.Errorf("record gap %d cleaned: %w", id, err)
	}
	return nil
}

// Gaps returns the gaps of slot, newest first: all those not cleaned yet,
// and the others detected since since.
func Gaps(ctx context.Context, conn *pgx.Conn, slot string, since time.Time) ([]Gap, error) {
	rows, _ := conn.Query(ctx, `SELECT id, slot, detected_at, cause, checkpoint, slot_lsn, rules, orphans_deleted, cleaned_at
FROM pgimageai.slot_gaps WHERE slot = $1 AND (cleaned_at IS NULL OR detected_at >= $2) ORDER BY id DESC`, slot, since)
	gaps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Gap, error) {
		var g Gap
		err := r.Scan(&g.ID, &g.Slot, &g.DetectedAt, &g.Cause, &g.Checkpoint, &g.SlotLSN, &g.Rules, &g.OrphansDeleted, &g.CleanedAt)
		return g, err
	})
	if err != nil {
		return nil, fmt.Errorf("read gaps of slot %s: %w", slot, err)
	}
	return gaps, nil
}
