package apply

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/pgimageai/pgimageai/bridge/leader"
	"github.com/pgimageai/pgimageai/bridge/track"
	"github.com/pgimageai/pgimageai/internal/backoff"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

// checkpointInterval is how often the slot's checkpoint is stored while it
// moves. The lanes' own checkpoints are written with every batch; this one
// only says where a restart starts reading, so storing it late costs a
// re-read of transactions whose items the lanes then skip.
const checkpointInterval = time.Second

// An idle stream's WAL end (WAL without changes for the lanes) is stored
// only once it is idleStoreBytes past what is stored: storing one writes
// WAL, and when the target is in the source's cluster that WAL would be the
// next idle WAL end — a store a second for good on an idle database. What is
// not stored is not confirmed either: an idle source makes the slot hold at
// most that much WAL.
const idleStoreBytes = 512 << 10

// Checkpointer stores the slot's confirmed LSN (what every lane has made
// durable) in pgimageai.checkpoints, at most once per interval and once more
// when it stops, and only then acks it to the slot: the slot is never
// confirmed past the stored checkpoint, so a slot found ahead of it at the
// next start has skipped changes (see bridge's gap handling). It runs on
// its own goroutine with its own writer.
type Checkpointer struct {
	w       *sink.Writer
	tracker *track.Tracker
	ack     func(replication.LSN)
	log     *slog.Logger
	stored  replication.LSN
}

// NewCheckpointer returns the checkpointer of what tracker confirms,
// storing through w and then calling ack; stored is the checkpoint stored
// already.
func NewCheckpointer(w *sink.Writer, tracker *track.Tracker, ack func(replication.LSN), log *slog.Logger, stored replication.LSN) *Checkpointer {
	return &Checkpointer{w: w, tracker: tracker, ack: ack, log: log, stored: stored}
}

// Run stores the checkpoint whenever it moved, at most once per interval,
// until ctx ends, then stores it a last time. A store behind another
// instance's is leader.ErrLeadershipLost; other failures are logged and tried
// again.
func (c *Checkpointer) Run(ctx context.Context) error {
	var last time.Time
	// retry brings a failed store back after an interval, even if the
	// slot's position does not move again.
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-retry.C:
			c.tracker.Poke()
		case <-c.tracker.Moved():
			if backoff.Wait(ctx, time.Until(last.Add(checkpointInterval))) != nil {
				continue // stores below
			}
			last = time.Now()
			if err := c.store(ctx, false); err != nil {
				if errors.Is(err, leader.ErrLeadershipLost) {
					return err
				}
				if ctx.Err() == nil {
					c.log.Warn("storing the checkpoint failed; retrying", "err", err)
					retry.Reset(checkpointInterval)
				}
			}
		case <-ctx.Done():
			return c.final(context.WithoutCancel(ctx))
		}
	}
}

// final stores the checkpoint a last time, on a fresh session when the
// last one broke, for up to 10 s. A failure is logged, not returned: every
// lane's own checkpoint is stored already, so a restart only reads again
// what the lanes then skip.
func (c *Checkpointer) final(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	bo := backoff.Backoff{Min: 100 * time.Millisecond, Max: 10 * time.Second}
	for {
		err := c.store(ctx, true)
		if err == nil || errors.Is(err, leader.ErrLeadershipLost) {
			return err
		}
		if bo.Sleep(ctx) != nil {
			c.log.Warn("storing the checkpoint at stop failed; the next run reads again from the slot's position", "err", err)
			return nil
		}
	}
}

// store stores the confirmed position when it moved; a small idle part of
// it is left out (see idleStoreBytes), unless final.
func (c *Checkpointer) store(ctx context.Context, final bool) error {
	lsn, _, _ := c.tracker.State()
	if durable := c.tracker.Durable(); !final && lsn > durable {
		if base := max(durable, c.stored); lsn-base < idleStoreBytes {
			lsn = base
		}
	}
	if lsn <= c.stored {
		return nil
	}
	if err := c.w.StoreCheckpoint(ctx, lsn); err != nil {
		if errors.Is(err, state.ErrFenced) {
			return fmt.Errorf("%w: %w", leader.ErrLeadershipLost, err)
		}
		return err
	}
	c.stored = lsn
	if c.ack != nil {
		c.ack(lsn)
	}
	return nil
}
