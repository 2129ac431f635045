package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/replication"
)

// Position is a place in the stream: the commit LSN of a source transaction
// and the ordinal of a change inside it. Positions order the changes of a
// lane, so that a lane's checkpoint can point inside a big transaction.
type Position struct {
	Commit replication.LSN // Begin.FinalLSN of the transaction
	Ord    int64           // change ordinal inside it
}

// Less reports whether p comes before q.
func (p Position) Less(q Position) bool {
	return p.Commit < q.Commit || (p.Commit == q.Commit && p.Ord < q.Ord)
}

// IsZero reports whether p is the zero position, before any change.
func (p Position) IsZero() bool { return p == Position{} }

func (p Position) String() string { return fmt.Sprintf("%s#%d", p.Commit, p.Ord) }

// Writer writes the batches of one lane to the target database. It is not
// safe for concurrent use: one goroutine applies a lane's batches in order.
type Writer struct {
	dsn  string
	conn *pgx.Conn
	slot string
	lane string
}

// NewWriter returns a Writer for lane of slot on conn (nil: connect on first
// use). When the connection breaks (a server restart, a network cut), the
// next Write reconnects with dsn.
func NewWriter(conn *pgx.Conn, dsn, slot, lane string) *Writer {
	return &Writer{dsn: dsn, conn: conn, slot: slot, lane: lane}
}

// Close closes the writer's connection.
func (w *Writer) Close(ctx context.Context) error {
	if w.conn == nil {
		return nil
	}
	err := w.conn.Close(ctx)
	w.conn = nil
	return err
}

// Conn returns a live connection, reconnecting after a broken one. It
// belongs to the writer: the caller uses it between writes, on the writer's
// goroutine.
func (w *Writer) Conn(ctx context.Context) (*pgx.Conn, error) {
	if w.conn != nil && !w.conn.IsClosed() {
		return w.conn, nil
	}
	conn, err := pgx.Connect(ctx, w.dsn)
	if err != nil {
		return nil, fmt.Errorf("connect to target: %w", err)
	}
	w.conn = conn
	return conn, nil
}

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
// greater.
const checkpointSQL = `INSERT INTO pgimageai.checkpoints AS c (slot, lsn, updated_at) VALUES ($1, $2, now())
ON CONFLICT (slot) DO UPDATE SET lsn = EXCLUDED.lsn, updated_at = EXCLUDED.updated_at
WHERE c.lsn <= EXCLUDED.lsn`

// Write applies ops and stores pos as the lane's checkpoint, all in one
// transaction. When it returns nil the batch is durable; on error nothing of
// it is applied. commitTime is the source commit time at pos.
func (w *Writer) Write(ctx context.Context, ops []Op, pos Position, commitTime time.Time) (err error) {
	conn, err := w.Conn(ctx)
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
	// First, so that it locks the lane's row: a second instance writing the
	// same lane waits here, then finds itself fenced.
	var ct any
	if !commitTime.IsZero() {
		ct = commitTime
	}
	b.Queue(laneCheckpointSQL, w.slot, w.lane, pos.Commit, pos.Ord, ct)
	for _, op := range ops {
		op.queue(b)
	}
	br := tx.SendBatch(ctx, b)
	tag, err := br.Exec()
	if err == nil && tag.RowsAffected() == 0 {
		err = fmt.Errorf("%w: lane %s of slot %s is checkpointed beyond %s", ErrFenced, w.lane, w.slot, pos)
	}
	if err != nil {
		br.Close()
		return fmt.Errorf("write %d ops of lane %s up to %s: %w", len(ops), w.lane, pos, err)
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("write %d ops of lane %s up to %s: %w", len(ops), w.lane, pos, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit %d ops of lane %s up to %s: %w", len(ops), w.lane, pos, err)
	}
	return nil
}

// StoreCheckpoint stores lsn as the slot's checkpoint: every lane has made
// durable what comes before it. A greater stored checkpoint is ErrFenced.
func (w *Writer) StoreCheckpoint(ctx context.Context, lsn replication.LSN) (err error) {
	conn, err := w.Conn(ctx)
	if err != nil {
		return err
	}
	tag, err := conn.Exec(ctx, checkpointSQL, w.slot, lsn)
	if err != nil {
		w.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("store checkpoint %s of slot %s: %w", lsn, w.slot, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: slot %s is checkpointed beyond %s", ErrFenced, w.slot, lsn)
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
