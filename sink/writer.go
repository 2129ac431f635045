package sink

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/replication"
)

// Writer writes batches to the target database. It is not safe for concurrent
// use: one goroutine applies batches in source commit order.
type Writer struct {
	dsn  string
	conn *pgx.Conn
	slot string
}

// NewWriter returns a Writer on conn that records checkpoints under slot.
// When conn breaks (a server restart, a network cut), the next Write
// reconnects with dsn.
func NewWriter(conn *pgx.Conn, dsn, slot string) *Writer {
	return &Writer{dsn: dsn, conn: conn, slot: slot}
}

// Close closes the writer's connection.
func (w *Writer) Close(ctx context.Context) error {
	if w.conn == nil {
		return nil
	}
	return w.conn.Close(ctx)
}

// connect returns a live connection, reconnecting after a broken one.
func (w *Writer) connect(ctx context.Context) (*pgx.Conn, error) {
	if w.conn != nil && !w.conn.IsClosed() {
		return w.conn, nil
	}
	conn, err := pgx.Connect(ctx, w.dsn)
	if err != nil {
		return nil, fmt.Errorf("reconnect to target: %w", err)
	}
	w.conn = conn
	return conn, nil
}

// ErrFenced reports a batch whose checkpoint is below the slot's stored one:
// another instance applied those transactions and more (a leader replaced
// while it was cut off). Nothing of the batch is written; the writer must
// stop, not retry.
var ErrFenced = errors.New("fenced: another pgimageai instance has applied this slot's changes beyond this batch")

// checkpointSQL stores a batch's checkpoint unless the stored one is
// greater. Equal is allowed: a batch of backfill pages carries the previous
// batch's checkpoint.
const checkpointSQL = `INSERT INTO pgimageai.checkpoints (slot, lsn, updated_at) VALUES ($1, $2, now())
ON CONFLICT (slot) DO UPDATE SET lsn = EXCLUDED.lsn, updated_at = EXCLUDED.updated_at
WHERE pgimageai.checkpoints.lsn <= EXCLUDED.lsn`

// Write applies ops and stores checkpoint (unless 0) as the slot's
// checkpoint, all in one transaction. When it returns nil the batch is durable and the caller
// may confirm checkpoint to the replication slot; on error nothing of the
// batch is applied.
func (w *Writer) Write(ctx context.Context, ops []Op, checkpoint replication.LSN) (err error) {
	conn, err := w.connect(ctx)
	if err != nil {
		return err
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin target transaction: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback(context.WithoutCancel(ctx))
			// A fresh session for the next attempt: this one may be broken,
			// or stuck in a state that caused the failure (a session that
			// began while the database was read-only stays read-only).
			w.Close(context.WithoutCancel(ctx))
		}
	}()
	b := &pgx.Batch{}
	if checkpoint != 0 { // 0: a batch of backfill pages only, before any source transaction
		// First, so that it locks the checkpoint row: a second instance
		// writing the same slot waits here, then finds itself fenced.
		b.Queue(checkpointSQL, w.slot, checkpoint)
	}
	for _, op := range ops {
		op.queue(b)
	}
	br := tx.SendBatch(ctx, b)
	if checkpoint != 0 {
		tag, err := br.Exec()
		if err == nil && tag.RowsAffected() == 0 {
			err = fmt.Errorf("%w: slot %s is checkpointed beyond %s", ErrFenced, w.slot, checkpoint)
		}
		if err != nil {
			br.Close()
			return fmt.Errorf("write batch of %d ops up to %s: %w", len(ops), checkpoint, err)
		}
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("write batch of %d ops up to %s: %w", len(ops), checkpoint, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit batch up to %s: %w", checkpoint, err)
	}
	return nil
}

// LoadCheckpoint returns the slot's stored checkpoint, or 0 when there is none.
func LoadCheckpoint(ctx context.Context, conn *pgx.Conn, slot string) (replication.LSN, error) {
	var lsn replication.LSN
	err := conn.QueryRow(ctx, "SELECT lsn FROM pgimageai.checkpoints WHERE slot = $1", slot).Scan(&lsn)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("load checkpoint of slot %s: %w", slot, err)
	}
	return lsn, nil
}
