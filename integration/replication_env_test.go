package integration

// Helpers of the replication package's integration tests (replication_test.go).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/replication"
)

// replEnv is a test database with tables, a publication over them and a
// slot, all named after the database (unique in the server).
type replEnv struct {
	db   *Database
	conn *pgx.Conn
	slot string
}

// newReplEnv runs ddl in a fresh database of pg (nil: the shared container),
// publishes the tables named by publish and creates the slot.
func newReplEnv(t *testing.T, pg *Postgres, ddl string, publish ...pgx.Identifier) *replEnv {
	t.Helper()
	if pg == nil {
		pg = Shared(t)
	}
	db := pg.NewDatabase(t)
	e := &replEnv{db: db, conn: db.Connect(t), slot: db.Name}
	ctx := t.Context()
	if err := replication.Preflight(ctx, e.conn); err != nil {
		t.Fatal(err)
	}
	e.exec(t, ddl)
	if err := replication.SyncPublication(ctx, e.conn, e.slot, publish); err != nil {
		t.Fatal(err)
	}
	if err := replication.EnsureSlot(ctx, e.conn, e.slot); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { replDropSlot(t, pg, e.slot) })
	return e
}

// replDropSlot drops slot, ending a walsender that still holds it.
func replDropSlot(t *testing.T, pg *Postgres, slot string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pg.DSN("postgres"))
	if err != nil {
		t.Errorf("drop slot %s: %v", slot, err)
		return
	}
	defer conn.Close(context.Background())
	for ctx.Err() == nil {
		_, err = conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, slot)
		if err == nil {
			_, err = conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, slot)
		}
		if err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("drop slot %s: %v", slot, err)
}

func (e *replEnv) exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	if _, err := e.conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// confirmed returns the slot's confirmed_flush_lsn.
func (e *replEnv) confirmed(t testing.TB) replication.LSN {
	t.Helper()
	var s string
	if err := e.conn.QueryRow(context.Background(), "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", e.slot).Scan(&s); err != nil {
		t.Fatal(err)
	}
	lsn, err := replication.ParseLSN(s)
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

func (e *replEnv) currentLSN(t testing.TB) replication.LSN {
	t.Helper()
	var s string
	if err := e.conn.QueryRow(context.Background(), "SELECT pg_current_wal_lsn()::text").Scan(&s); err != nil {
		t.Fatal(err)
	}
	lsn, err := replication.ParseLSN(s)
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

// replStream is a running Stream and what it emits.
type replStream struct {
	*replication.Stream
	events     chan replication.Event
	done       chan struct{} // closed when Run returned, with err set
	err        error
	cancel     context.CancelFunc
	reconnects *atomic.Int64
}

// start runs a Stream on e from start until the test ends; edit adjusts its
// Config and buffer the capacity of its channel.
func (e *replEnv) start(t *testing.T, start replication.LSN, buffer int, edit func(*replication.Config)) *replStream {
	t.Helper()
	var reconnects atomic.Int64
	cfg := replication.Config{
		ConnString: e.db.DSN(), Slot: e.slot, Publication: e.slot,
		StatusInterval: 200 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(replLogWriter{t: t, reconnects: &reconnects}, nil)),
	}
	if edit != nil {
		edit(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &replStream{Stream: replication.NewStream(cfg), events: make(chan replication.Event, buffer),
		done: make(chan struct{}), cancel: cancel, reconnects: &reconnects}
	go func() {
		s.err = s.Run(ctx, start, s.events)
		close(s.done)
	}()
	t.Cleanup(func() { s.stop(t) })
	return s
}

// stop ends Run and waits for it; Run must have returned context.Canceled.
func (s *replStream) stop(t testing.TB) {
	t.Helper()
	s.cancel()
	select {
	case <-s.done:
		if !errors.Is(s.err, context.Canceled) {
			t.Errorf("Run = %v, want context.Canceled", s.err)
		}
	case <-time.After(30 * time.Second):
		t.Error("Run did not return within 30s of cancel")
	}
}

// next returns the next event, failing after timeout.
func (s *replStream) next(t testing.TB, timeout time.Duration) replication.Event {
	t.Helper()
	select {
	case ev := <-s.events:
		return ev
	case <-s.done:
		t.Fatalf("Run returned %v", s.err)
	case <-time.After(timeout):
		t.Fatalf("no event within %s", timeout)
	}
	return nil
}

// tx is one emitted transaction.
type tx struct {
	begin   replication.Begin
	changes []*replication.Change
	msgs    []*replication.Message
	commit  replication.Commit
}

// nextTx reads one whole transaction; it fails on a Reset.
func (s *replStream) nextTx(t testing.TB) tx {
	t.Helper()
	var x tx
	ev := s.next(t, 20*time.Second)
	b, ok := ev.(replication.Begin)
	if !ok {
		t.Fatalf("got %#v, want Begin", ev)
	}
	x.begin = b
	for {
		switch ev := s.next(t, 20*time.Second).(type) {
		case *replication.Change:
			x.changes = append(x.changes, ev)
		case *replication.Message:
			x.msgs = append(x.msgs, ev)
		case replication.Commit:
			x.commit = ev
			return x
		default:
			t.Fatalf("inside a transaction: %#v", ev)
		}
	}
}

// quiet asserts that no event arrives for d.
func (s *replStream) quiet(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case ev := <-s.events:
		t.Fatalf("unexpected event %#v", ev)
	case <-time.After(d):
	}
}

// replLogWriter sends the stream's log to t.Log and counts reconnects.
type replLogWriter struct {
	t          testing.TB
	reconnects *atomic.Int64
}

func (w replLogWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("reconnecting")) {
		w.reconnects.Add(1)
	}
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func mustBytea(t testing.TB, v replication.Value) []byte {
	t.Helper()
	b, err := v.Bytea()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func int4Value(t testing.TB, rel *replication.Relation, v replication.Value) int32 {
	t.Helper()
	got, err := replication.DecodeValue(nil, rel.Columns[0], v)
	if err != nil {
		t.Fatal(err)
	}
	return got.(int32)
}

var replRoleSeq atomic.Int64

// newRole creates a login role (roles are server-wide) and drops it at the end.
func newRole(t *testing.T, e *replEnv, attrs string) (name, password string) {
	t.Helper()
	name = fmt.Sprintf("%s_r%d", e.slot[:min(len(e.slot), 40)], replRoleSeq.Add(1))
	password = "pw-" + name
	e.exec(t, fmt.Sprintf("CREATE ROLE %s LOGIN %s PASSWORD '%s'", pgx.Identifier{name}.Sanitize(), attrs, password))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = e.db.Postgres().Exec(ctx, "postgres", `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, name)
		if err := e.db.Postgres().Exec(ctx, "postgres", "DROP ROLE IF EXISTS "+pgx.Identifier{name}.Sanitize()); err != nil {
			t.Errorf("drop role: %v", err)
		}
	})
	return name, password
}
