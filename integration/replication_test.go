package integration

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/replication"
)

// These tests drive package replication against a real server: each has its
// own database, tables, publication and slot (see replication_env_test.go).

var photos = pgx.Identifier{"public", "photos"}

const photosDDL = `CREATE TABLE public.photos (id int PRIMARY KEY, img bytea, note text)`

func TestReplicationChanges(t *testing.T) {
	e := newReplEnv(t, nil, photosDDL, photos)
	s := e.start(t, 0, 64, nil)
	img := append([]byte{0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A, 0x00, '\\', 'x', 0xFF}, RandomBytes(t, 500)...)

	e.exec(t, `INSERT INTO photos VALUES (1, $1, 'a'), (2, NULL, 'b'), (3, '', 'c')`, img)
	x := s.nextTx(t)
	if x.begin.FinalLSN != x.commit.CommitLSN || x.commit.EndLSN <= x.commit.CommitLSN || x.begin.XID != x.commit.XID || x.begin.XID == 0 {
		t.Errorf("begin %+v / commit %+v", x.begin, x.commit)
	}
	if len(x.changes) != 3 {
		t.Fatalf("%d changes, want 3", len(x.changes))
	}
	rel := x.changes[0].Relation
	if rel.Namespace != "public" || rel.Name != "photos" || len(rel.Columns) != 3 ||
		!rel.Columns[0].Key || rel.Columns[1].Key || rel.Columns[1].TypeOID != 17 {
		t.Fatalf("relation %+v", rel)
	}
	for i, c := range x.changes {
		if c.Op != replication.Insert || c.Relation != rel || c.Old != nil || c.LSN == 0 {
			t.Errorf("change %d: %+v", i, c)
		}
		if got := int4Value(t, rel, c.New[0]); got != int32(i+1) {
			t.Errorf("change %d: id %d", i, got)
		}
	}
	if v := x.changes[0].New[1]; v.Kind != replication.Binary || !bytes.Equal(mustBytea(t, v), img) {
		t.Errorf("image: kind %s, %d bytes, want binary %d bytes", v.Kind, len(v.Data), len(img))
	}
	if v := x.changes[1].New[1]; v.Kind != replication.Null {
		t.Errorf("NULL image arrived as %s", v.Kind)
	}
	if v := x.changes[2].New[1]; v.Kind != replication.Binary || mustBytea(t, v) == nil || len(v.Data) != 0 {
		t.Errorf("empty image arrived as %s %v", v.Kind, v.Data)
	}

	e.exec(t, `UPDATE photos SET note = 'a2' WHERE id = 1`)
	u := s.nextTx(t).changes[0]
	if u.Op != replication.Update || u.Old != nil || !bytes.Equal(mustBytea(t, u.New[1]), img) {
		t.Errorf("update: %+v", u)
	}
	if note, err := replication.DecodeValue(nil, rel.Columns[2], u.New[2]); err != nil || note != "a2" {
		t.Errorf("note = %v, %v", note, err)
	}

	e.exec(t, `DELETE FROM photos WHERE id = 2`)
	d := s.nextTx(t).changes[0]
	if d.Op != replication.Delete || d.New != nil || int4Value(t, rel, d.Old[0]) != 2 || d.Old[1].Kind != replication.Null {
		t.Errorf("delete: %+v", d)
	}

	e.exec(t, `BEGIN; SELECT pg_logical_emit_message(true, 'pgimageai', 'hello'); INSERT INTO photos VALUES (4, NULL, NULL); COMMIT`)
	m := s.nextTx(t)
	if len(m.msgs) != 1 || m.msgs[0].Prefix != "pgimageai" || string(m.msgs[0].Content) != "hello" || !m.msgs[0].Transactional || len(m.changes) != 1 {
		t.Errorf("message transaction: %+v %+v", m.msgs, m.changes)
	}

	e.exec(t, `TRUNCATE photos RESTART IDENTITY CASCADE`)
	tr := s.nextTx(t).changes[0]
	if tr.Op != replication.Truncate || len(tr.Truncated) != 1 || tr.Truncated[0].Name != "photos" || !tr.Cascade || !tr.Restart {
		t.Errorf("truncate: %+v", tr)
	}
	s.quiet(t, 300*time.Millisecond)
}

func TestReplicationUnchangedToast(t *testing.T) {
	e := newReplEnv(t, nil, photosDDL+`; ALTER TABLE photos ALTER COLUMN img SET STORAGE EXTERNAL`, photos)
	s := e.start(t, 0, 8, nil)
	img, img2 := RandomBytes(t, 100<<10), RandomBytes(t, 100<<10)

	e.exec(t, `INSERT INTO photos VALUES (1, $1, 'x')`, img)
	if v := s.nextTx(t).changes[0].New[1]; v.Kind != replication.Binary || !bytes.Equal(v.Data, img) {
		t.Fatalf("inserted 100 KB image: kind %s, %d bytes", v.Kind, len(v.Data))
	}
	e.exec(t, `UPDATE photos SET note = 'y' WHERE id = 1`)
	v := s.nextTx(t).changes[0].New[1]
	if v.Kind != replication.Unchanged || v.Data != nil {
		t.Errorf("untouched TOASTed image arrived as %s with %d bytes, want unchanged", v.Kind, len(v.Data))
	}
	if _, err := v.Bytea(); !errors.Is(err, replication.ErrUnchanged) {
		t.Errorf("Bytea of unchanged = %v", err)
	}
	e.exec(t, `UPDATE photos SET img = $1 WHERE id = 1`, img2)
	if v := s.nextTx(t).changes[0].New[1]; v.Kind != replication.Binary || !bytes.Equal(v.Data, img2) {
		t.Errorf("replaced image: kind %s, %d bytes", v.Kind, len(v.Data))
	}
}

func TestReplicationKeyChange(t *testing.T) {
	e := newReplEnv(t, nil, photosDDL+`; CREATE TABLE public.full_photos (id int PRIMARY KEY, img bytea);
		ALTER TABLE public.full_photos REPLICA IDENTITY FULL`, photos, pgx.Identifier{"public", "full_photos"})
	s := e.start(t, 0, 8, nil)
	e.exec(t, `INSERT INTO photos VALUES (1, '\x0102', 'n'); INSERT INTO full_photos VALUES (1, '\x0304')`) // one transaction
	if x := s.nextTx(t); len(x.changes) != 2 {
		t.Fatalf("%d changes, want 2", len(x.changes))
	}

	e.exec(t, `UPDATE photos SET id = 2 WHERE id = 1`)
	c := s.nextTx(t).changes[0]
	if c.Old == nil || c.Old[0].Kind != replication.Binary || int4Value(t, c.Relation, c.Old[0]) != 1 ||
		c.Old[1].Kind != replication.Null || int4Value(t, c.Relation, c.New[0]) != 2 {
		t.Errorf("key change: old %+v new %+v", c.Old, c.New)
	}
	if c.Relation.ReplicaIdentity != 'd' {
		t.Errorf("replica identity %q", c.Relation.ReplicaIdentity)
	}

	e.exec(t, `UPDATE full_photos SET img = '\x05' WHERE id = 1`)
	c = s.nextTx(t).changes[0]
	if c.Relation.ReplicaIdentity != 'f' || c.Old == nil || !bytes.Equal(mustBytea(t, c.Old[1]), []byte{3, 4}) || !bytes.Equal(mustBytea(t, c.New[1]), []byte{5}) {
		t.Errorf("REPLICA IDENTITY FULL: old %+v new %+v", c.Old, c.New)
	}
}

func TestReplicationAckConfirms(t *testing.T) {
	e := newReplEnv(t, nil, photosDDL, photos)
	// A long StatusInterval: only the Ack itself can confirm promptly.
	s := e.start(t, 0, 8, func(c *replication.Config) { c.StatusInterval = 10 * time.Second })
	e.exec(t, `INSERT INTO photos VALUES (1, NULL, NULL)`)
	x := s.nextTx(t)
	if before := e.confirmed(t); before >= x.commit.CommitLSN {
		t.Fatalf("confirmed_flush_lsn %s before the ack, commit at %s", before, x.commit.CommitLSN)
	}
	s.Ack(x.commit.EndLSN)
	took := WaitFor(t, 5*time.Second, "confirmed_flush_lsn to reach the ack", func() bool { return e.confirmed(t) >= x.commit.EndLSN })
	t.Logf("Ack(%s) reached confirmed_flush_lsn in %s", x.commit.EndLSN, took)
	if took > 2*time.Second {
		t.Errorf("ack took %s to be confirmed; want prompt", took)
	}
}

func TestReplicationRestartSkipsAcked(t *testing.T) {
	e := newReplEnv(t, nil, photosDDL, photos)
	s1 := e.start(t, 0, 8, nil)
	var xs []tx
	for id := 1; id <= 2; id++ {
		e.exec(t, `INSERT INTO photos VALUES ($1, NULL, NULL)`, id)
		xs = append(xs, s1.nextTx(t))
	}
	s1.Ack(xs[0].commit.EndLSN)
	WaitFor(t, 5*time.Second, "the ack", func() bool { return e.confirmed(t) >= xs[0].commit.EndLSN })
	s1.stop(t)
	e.exec(t, `INSERT INTO photos VALUES (3, NULL, NULL)`)

	// Restart at the acked checkpoint: transaction 1 must not come again.
	s2 := e.start(t, xs[0].commit.EndLSN, 8, nil)
	for _, want := range []int32{2, 3} {
		x := s2.nextTx(t)
		if got := int4Value(t, x.changes[0].Relation, x.changes[0].New[0]); got != want {
			t.Fatalf("after restart got row %d, want %d", got, want)
		}
	}
	s2.quiet(t, 300*time.Millisecond)
	s2.stop(t)

	// A checkpoint beyond the slot's confirmed position (the ack never
	// reached the slot): transaction 2 is skipped as well.
	s3 := e.start(t, xs[1].commit.EndLSN, 8, nil)
	x := s3.nextTx(t)
	if got := int4Value(t, x.changes[0].Relation, x.changes[0].New[0]); got != 3 {
		t.Fatalf("got row %d, want 3", got)
	}
	s3.quiet(t, 300*time.Millisecond)
}

func TestReplicationIdleAdvances(t *testing.T) {
	e := newReplEnv(t, nil, photosDDL+`; CREATE TABLE public.other (id int, pad text)`, photos)
	s := e.start(t, 0, 8, nil)
	start := e.confirmed(t)
	var mid replication.LSN
	for i := 0; i < 20; i++ {
		if i == 19 {
			mid = e.currentLSN(t)
		}
		e.exec(t, `INSERT INTO other SELECT g, repeat('x', 500) FROM generate_series(1, 200) g`)
	}
	took := WaitFor(t, 10*time.Second, "confirmed_flush_lsn to pass unpublished writes", func() bool { return e.confirmed(t) >= mid })
	t.Logf("idle slot advanced from %s past %s (%d bytes of unpublished WAL) in %s", start, mid, mid-start, took)
	s.quiet(t, 200*time.Millisecond)
}

// TestReplicationBackpressure holds the consumer for five wal_sender_timeouts:
// status updates keep the walsender alive (same PID, no reconnect) and
// nothing is lost or repeated.
func TestReplicationBackpressure(t *testing.T) {
	e := newReplEnv(t, nil, photosDDL, photos)
	s := e.start(t, 0, 1, func(c *replication.Config) {
		c.ConnString += "&options=-c%20wal_sender_timeout%3D1s"
	})
	const n = 40
	for id := 1; id <= n; id++ {
		e.exec(t, `INSERT INTO photos VALUES ($1, $2, NULL)`, id, RandomBytes(t, 64<<10))
	}
	first := s.next(t, 10*time.Second)
	if _, ok := first.(replication.Begin); !ok {
		t.Fatalf("first event %#v", first)
	}
	pid := e.walsenderPID(t)
	time.Sleep(5 * time.Second)
	for id := 1; id <= n; id++ {
		var x tx
		if id == 1 {
			c := s.next(t, time.Second).(*replication.Change)
			s.next(t, time.Second) // Commit
			x.changes = []*replication.Change{c}
		} else {
			x = s.nextTx(t)
		}
		if got := int4Value(t, x.changes[0].Relation, x.changes[0].New[0]); got != int32(id) {
			t.Fatalf("transaction %d carries row %d", id, got)
		}
	}
	time.Sleep(500 * time.Millisecond)
	if r := s.reconnects.Load(); r != 0 {
		t.Errorf("%d reconnects while the consumer was slow; want none", r)
	}
	if now := e.walsenderPID(t); now != pid {
		t.Errorf("walsender %d was replaced by %d: it timed out", pid, now)
	}
	s.quiet(t, 100*time.Millisecond)
}

func TestReplicationPrivilege(t *testing.T) {
	e := newReplEnv(t, nil, photosDDL, photos)
	role, pw := newRole(t, e, "NOREPLICATION")
	dsn := WithUser(t, e.db.DSN(), role, pw)
	ctx := t.Context()

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	err = replication.Preflight(ctx, conn)
	if !errors.Is(err, replication.ErrPrivilege) || !strings.Contains(err.Error(), "ALTER ROLE") {
		t.Errorf("Preflight = %v, want ErrPrivilege with ALTER ROLE advice", err)
	}

	s := replication.NewStream(replication.Config{ConnString: dsn, Slot: e.slot, Publication: e.slot})
	runCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	t0 := time.Now()
	err = s.Run(runCtx, 0, make(chan replication.Event))
	if !errors.Is(err, replication.ErrPrivilege) || !strings.Contains(err.Error(), "REPLICATION") {
		t.Errorf("Run = %v, want ErrPrivilege", err)
	}
	t.Logf("Run gave up after %s: %v", time.Since(t0), err)

	replRole, replPW := newRole(t, e, "REPLICATION")
	ok, err := pgx.Connect(ctx, WithUser(t, e.db.DSN(), replRole, replPW))
	if err != nil {
		t.Fatal(err)
	}
	defer ok.Close(context.Background())
	if err := replication.Preflight(ctx, ok); err != nil {
		t.Errorf("Preflight for a REPLICATION role: %v", err)
	}
}
