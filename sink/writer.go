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
		}
	}()
	b := &pgx.Batch{}
	for _, op := range ops {
		op.queue(b)
	}
	if checkpoint != 0 { // 0: a batch of backfill pages only, before any source transaction
		b.Queue(`INSERT INTO pgimageai.checkpoints (slot, lsn, updated_at) VALUES ($1, $2, now())
ON CONFLICT (slot) DO UPDATE SET lsn = EXCLUDED.lsn, updated_at = EXCLUDED.updated_at`, w.slot, checkpoint)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
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
