package sink

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/internal/reconn"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/state"
)

// Writer writes the batches of one lane to the target database. It is not
// safe for concurrent use: one goroutine applies a lane's batches in order.
type Writer struct {
	conn *reconn.Conn
	slot string
	lane string
}

// NewWriter returns a Writer for lane of slot ("" for the slot's own
// checkpoint) on the target dsn. It connects on first use, and again after
// a failed write (a server restart, a network cut, a session that may be
// broken).
func NewWriter(dsn, slot, lane string) *Writer {
	return &Writer{conn: reconn.New("target", dsn, nil), slot: slot, lane: lane}
}

// Close closes the writer's connection.
func (w *Writer) Close(ctx context.Context) error {
	w.conn.Drop(ctx)
	return nil
}

// Forget deletes the lane's checkpoint row: the lane is retired (no rule
// writes its target any more).
func (w *Writer) Forget(ctx context.Context) error {
	return w.conn.Do(ctx, func(c *pgx.Conn) error { return state.ForgetLane(ctx, c, w.slot, w.lane) })
}

// Write applies ops and stores pos as the lane's checkpoint, all in one
// transaction. When it returns nil the batch is durable; on error nothing of
// it is applied. commitTime is the source commit time at pos.
func (w *Writer) Write(ctx context.Context, ops []Op, pos state.Position, commitTime time.Time) (err error) {
	conn, err := w.conn.Get(ctx)
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
	state.QueueLaneCheckpoint(b, w.slot, w.lane, pos, commitTime) // first: it fences
	guarded := map[uint32]bool{}
	for _, op := range ops {
		if u, ok := op.(Upsert); ok && u.Target.WriteBack && !u.Target.TrustCode && !guarded[u.Target.Table.OID] {
			guarded[u.Target.Table.OID] = true
			b.Queue(catalog.UserCodeGuard(u.Target.Table))
		}
		op.Queue(b)
	}
	br := tx.SendBatch(ctx, b)
	tag, err := br.Exec()
	if err == nil {
		err = state.Fenced(tag, w.slot, w.lane, pos)
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

// StoreCheckpoint stores lsn as the slot's checkpoint on the writer's
// connection (see state.StoreCheckpoint); a failed store gets a fresh
// session next time.
func (w *Writer) StoreCheckpoint(ctx context.Context, lsn replication.LSN) error {
	conn, err := w.conn.Get(ctx)
	if err != nil {
		return err
	}
	if err := state.StoreCheckpoint(ctx, conn, w.slot, lsn); err != nil {
		if !errors.Is(err, state.ErrFenced) {
			w.Close(context.WithoutCancel(ctx))
		}
		return err
	}
	return nil
}

// Op is one effect of a source change on the target database. Ops queue their
// statements on the batch of the one transaction that Writer.Write runs: the
// ops on target tables are here, those on pgimageai.* tables in package state.
type Op interface {
	Queue(b *pgx.Batch)
}

// Upsert writes a result: the row keyed Key gets Value in the target column,
// inserted or updated, and only when the value differs. A nil Value is SQL
// NULL; otherwise a string (text) or a []float32 (vector).
type Upsert struct {
	Target *Target
	Key    []any
	Value  any
}

func (o Upsert) Queue(b *pgx.Batch) {
	v := o.Value
	if vec, ok := v.([]float32); ok && o.Target.Vector {
		v = VectorText(vec)
	}
	b.Queue(o.Target.upsert, append(append([]any{}, o.Key...), v)...)
}

// Upserts writes many text or JSON results into one column of a target
// table that is not the source (see Upsert), in one statement: what a lane
// writes most, and per row the costliest part of a write for the database.
// Keys are the rows' source_key JSON, distinct; a Value is a string or nil
// (SQL NULL).
type Upserts struct {
	Target *Target
	Keys   []string
	Values []any
}

// Many reports whether t takes Upserts: text and JSON results of every
// target but write-back.
func (t *Target) Many() bool { return t.upsertMany != "" }

func (o Upserts) Queue(b *pgx.Batch) {
	vals := make([]*string, len(o.Values))
	for i, v := range o.Values {
		if s, ok := v.(string); ok {
			vals[i] = &s
		}
	}
	b.Queue(o.Target.upsertMany, o.Keys, vals, o.Target.Key)
}

// Delete removes the target row keyed Key.
type Delete struct {
	Target *Target
	Key    []any
}

func (o Delete) Queue(b *pgx.Batch) { b.Queue(o.Target.del, o.Key...) }

// Move re-keys a target row after the source row's primary key changed. A
// stale row at the new key, which cannot correspond to a source row, goes
// first.
type Move struct {
	Target         *Target
	OldKey, NewKey []any
}

func (o Move) Queue(b *pgx.Batch) {
	keys := append(append([]any{}, o.NewKey...), o.OldKey...)
	// Only while the old row is there: a Move written again (a replay)
	// must not delete the row it moved.
	b.Queue(o.Target.delStale, keys...)
	b.Queue(o.Target.move, keys...)
}

// Truncate empties a target table.
type Truncate struct {
	Target *Target
}

func (o Truncate) Queue(b *pgx.Batch) { b.Queue("TRUNCATE " + o.Target.Table.Identifier().Sanitize()) }

// VectorText renders v in pgvector's text form, "[0.1,0.2]".
func VectorText(v []float32) string {
	var sb strings.Builder
	sb.Grow(len(v)*10 + 2)
	sb.WriteByte('[')
	for i, x := range v {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.FormatFloat(float64(x), 'g', -1, 32))
	}
	sb.WriteByte(']')
	return sb.String()
}
