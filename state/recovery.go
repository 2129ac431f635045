package state

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// What a slot recovery (pgimageai recover-slot) forgets of the bookkeeping.

// Progress is the bookkeeping ForgetProgress removed.
type Progress struct {
	Checkpoint *string // the slot's checkpoint LSN as stored; nil when none
	Lanes      int64   // pgimageai.lane_checkpoints rows of the slot deleted
	Backfills  int64   // pgimageai.backfills rows deleted
}

// ForgetProgress deletes, in tx, the checkpoints of slot (its lanes' too) and every row of
// pgimageai.backfills: the next run starts at the slot's own position and
// every enabled rule backfills again (a rule without a backfills row starts
// a new backfill). The caller commits tx once the old slot is gone.
//
// rules are the rules of the slot's group: only their backfill states go.
func ForgetProgress(ctx context.Context, tx pgx.Tx, slot string, rules []string) (Progress, error) {
	var p Progress
	var lsn string
	err := tx.QueryRow(ctx, "DELETE FROM pgimageai.checkpoints WHERE slot = $1 RETURNING lsn::text", slot).Scan(&lsn)
	switch {
	case err == nil:
		p.Checkpoint = &lsn
	case !errors.Is(err, pgx.ErrNoRows):
		return p, fmt.Errorf("forget checkpoint of slot %s: %w", slot, err)
	}
	tag, err := tx.Exec(ctx, "DELETE FROM pgimageai.lane_checkpoints WHERE slot = $1", slot)
	if err != nil {
		return p, fmt.Errorf("forget lane checkpoints of slot %s: %w", slot, err)
	}
	p.Lanes = tag.RowsAffected()
	// Their Batch API batches are of no use any more: the next run cancels
	// them at the provider (pgimageai.batch_cleanup).
	if err := giveUpBatches(ctx, tx, rules); err != nil {
		return p, err
	}
	tag, err = tx.Exec(ctx, "DELETE FROM pgimageai.backfills WHERE rule = ANY($1)", rules)
	if err != nil {
		return p, fmt.Errorf("forget backfills: %w", err)
	}
	p.Backfills = tag.RowsAffected()
	return p, nil
}
