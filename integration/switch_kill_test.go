package integration_test

import (
	"context"
	"syscall"
	"testing"
	"time"
)

// TestSwitchKilled: a `pgimageai run` killed with SIGKILL while the new
// version is computed on the side, and again while the switch transaction
// waits for its lock (a reader holds the table), leaves the live column
// whole; the next run resumes the side work without paying again for the
// rows stored, and switches once.
func TestSwitchKilled(t *testing.T) {
	x := newSwitchSetup(t, 150)
	s := x.s
	s.exec(t, `UPDATE pgimageai.models SET options = '{"max_concurrency": 4}' WHERE name = 'emb'`)
	p := s.runProcess(t)
	waitFor(t, 60*time.Second, "150 vectors of model a", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM public.vecs WHERE v IS NOT NULL") == 150
	})
	sm := startSampler(t, x)
	x.b.delay.Store(int64(20 * time.Millisecond))
	x.toB(t)

	// Phase 1: killed while computing on the side.
	waitFor(t, 60*time.Second, "model b's stored results", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.results WHERE rule LIKE 'vec@%'") >= 40
	})
	p.signal(t, syscall.SIGKILL)
	stored := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.results WHERE rule LIKE 'vec@%'")
	callsAtKill := x.b.calls.Load()
	if typ := vecsColumnType(t, s.conn, "v"); typ != "vector(8)" {
		t.Fatalf("live column %q after a kill while computing, want vector(8)", typ)
	}

	// Phase 2: a reader holds the table, so the switch transaction waits
	// for its lock (lock_timeout) and tries again; killed meanwhile.
	holder := s.db.Connect(t)
	tx, err := holder.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(context.Background(), "LOCK TABLE public.vecs IN ACCESS SHARE MODE"); err != nil {
		t.Fatal(err)
	}
	x.b.delay.Store(0)
	p = s.runProcess(t)
	waitFor(t, 90*time.Second, "the switch waiting for its lock", func() bool {
		return queryInt(t, s.conn, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'ALTER TABLE%DROP COLUMN%'`) > 0
	})
	p.signal(t, syscall.SIGKILL)
	if err := tx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	if typ := vecsColumnType(t, s.conn, "v"); typ != "vector(8)" {
		t.Fatalf("live column %q after a kill during the switch, want vector(8)", typ)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.switch_history"); n != 0 {
		t.Fatalf("%d switch history rows before the switch committed", n)
	}

	// The third run switches.
	s.runProcess(t)
	x.waitOutcome(t, "switched", 90*time.Second)
	s.sync(t, 30*time.Second)
	sm.finish()
	if m := sm.mixed.Load(); m != 0 {
		t.Errorf("%d of %d samples saw both versions", m, sm.samples.Load())
	}
	if typ := vecsColumnType(t, s.conn, "v"); typ != "vector(16)" {
		t.Fatalf("live column %q, want vector(16)", typ)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.vecs WHERE vector_dims(v) = 16 AND (v::real[])[1] = 2"); n != 150 {
		t.Errorf("%d rows hold model b's vector, want 150", n)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.switch_history WHERE rule = 'vec'"); n != 1 {
		t.Errorf("%d switch history rows, want 1", n)
	}
	// Never paid twice for a stored row: what the first run stored was not
	// asked again; calls in flight at a kill (at most max_concurrency) and
	// one probe per start that found no shadow column are the only extra.
	if n, max := x.b.calls.Load(), int64(150+4+1); n > max {
		t.Errorf("model b was called %d times (%d at the first kill, %d stored then), want at most %d", n, callsAtKill, stored, max)
	}
}
