package state

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgimageai/pgimageai/value"
)

// Position is a place in the stream (value.Position, named here for the
// callers).
type Position = value.Position

// ErrFenced reports a write behind the stored checkpoint of its lane or
// slot: another instance applied those changes and more (a leader replaced
// while it was cut off). Nothing of the batch is written; the writer must
// stop, not retry.
var ErrFenced = errors.New("fenced: another pgimageai instance has applied this slot's changes beyond this batch")

// laneCheckpointSQL stores a lane's position unless the stored one is
// greater. Equal is allowed: the same batch written again is the same.
const laneCheckpointSQL = `INSERT INTO pgimageai.lane_checkpoints AS c (slot, lane, lsn, ord, commit_time, updated_at)
VALUES ($1, $2, $3, $4, $5, now())
ON CONFLICT (slot, lane) DO UPDATE SET lsn = EXCLUDED.lsn, ord = EXCLUDED.ord, commit_time = EXCLUDED.commit_time, updated_at = now()
WHERE (c.lsn, c.ord) <= (EXCLUDED.lsn, EXCLUDED.ord)`

// checkpointSQL stores the slot's checkpoint unless the stored one is
// greater. bounds_slot: the slot is confirmed only up to what is stored
// (see LoadCheckpoint).
const checkpointSQL = `INSERT INTO pgimageai.checkpoints AS c (slot, lsn, updated_at, bounds_slot) VALUES ($1, $2, now(), true)
ON CONFLICT (slot) DO UPDATE SET lsn = EXCLUDED.lsn, updated_at = EXCLUDED.updated_at, bounds_slot = true
WHERE c.lsn <= EXCLUDED.lsn`

// QueueLaneCheckpoint queues the statement that stores pos as lane's
// position of slot, unless the stored one is greater. Queue it first in a
// lane's batch, so that it locks the lane's row: a second instance writing the
// same lane waits there, then finds itself fenced; pass the statement's
// command tag to Fenced.
func QueueLaneCheckpoint(b *pgx.Batch, slot, lane string, pos Position, commitTime time.Time) {
	var ct any
	if !commitTime.IsZero() {
		ct = commitTime
	}
	b.Queue(laneCheckpointSQL, slot, lane, pos.Commit, pos.Ord, ct)
}

// Fenced returns ErrFenced when the lane checkpoint statement stored nothing.
func Fenced(tag pgconn.CommandTag, slot, lane string, pos Position) error {
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: lane %s of slot %s is checkpointed beyond %s", ErrFenced, lane, slot, pos)
	}
	return nil
}

// StoreCheckpoint stores lsn as the slot's checkpoint: every lane has made
// durable what comes before it. A greater stored checkpoint is ErrFenced.
func StoreCheckpoint(ctx context.Context, conn *pgx.Conn, slot string, lsn value.LSN) error {
	tag, err := conn.Exec(ctx, checkpointSQL, slot, lsn)
	if err != nil {
		return fmt.Errorf("store checkpoint %s of slot %s: %w", lsn, slot, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: slot %s is checkpointed beyond %s", ErrFenced, slot, lsn)
	}
	return nil
}

// LoadCheckpoint returns the slot's stored checkpoint, or 0 when there is none.
func LoadCheckpoint(ctx context.Context, conn *pgx.Conn, slot string) (value.LSN, error) {
	cp, _, err := ReadCheckpoint(ctx, conn, slot)
	return cp.LSN, err
}

// LoadLaneCheckpoints returns the stored position of every lane of slot.
func LoadLaneCheckpoints(ctx context.Context, conn *pgx.Conn, slot string) (map[string]Position, error) {
	rows, err := conn.Query(ctx, "SELECT lane, lsn, ord FROM pgimageai.lane_checkpoints WHERE slot = $1", slot)
	if err != nil {
		return nil, fmt.Errorf("load lane checkpoints of slot %s: %w", slot, err)
	}
	out := map[string]Position{}
	var lane string
	var p Position
	_, err = pgx.ForEachRow(rows, []any{&lane, &p.Commit, &p.Ord}, func() error {
		out[lane] = p
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load lane checkpoints of slot %s: %w", slot, err)
	}
	return out, nil
}

// ForgetLane deletes the checkpoint row of a retired lane of slot.
func ForgetLane(ctx context.Context, conn *pgx.Conn, slot, lane string) error {
	if _, err := conn.Exec(ctx, "DELETE FROM pgimageai.lane_checkpoints WHERE slot = $1 AND lane = $2", slot, lane); err != nil {
		return fmt.Errorf("forget lane %s: %w", lane, err)
	}
	return nil
}
