package integration_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/integration"
)

// TestSwitchKilled: a `pgimageai run` killed with SIGKILL while the new
// version is computed on the side, while the shadow column's index is
// built, and inside the switch transaction (a held row makes it wait),
// leaves the live column whole each time; the next run
// resumes the side work without paying again for the rows stored, builds
// the index again, and switches once.
func TestSwitchKilled(t *testing.T) {
	x := newSwitchSetup(t, 150)
	s := x.s
	s.exec(t, `UPDATE pgimageai.models SET options = '{"max_concurrency": 4}' WHERE name = 'emb'`)
	p := s.runProcess(t)
	x.waitA(t, 150)
	sm := startSampler(t, x)
	x.b.delay.Store(int64(20 * time.Millisecond))
	x.toB(t)

	// Phase 1: killed while computing on the side.
	integration.WaitFor(t, 60*time.Second, "model b's stored results", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.results WHERE rule LIKE 'vec@%'") >= 40
	})
	p.signal(t, syscall.SIGKILL)
	stored := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.results WHERE rule LIKE 'vec@%'")
	callsAtKill := x.b.calls.Load()
	if typ := vecsColumnType(t, s.conn, "v"); typ != "vector(8)" {
		t.Fatalf("live column %q after a kill while computing, want vector(8)", typ)
	}

	// Phase 2: killed while the shadow column's index is built: an open
	// snapshot makes CREATE INDEX CONCURRENTLY wait; the bridge is killed
	// and the build's backend terminated, which leaves an invalid index.
	snap := s.db.Connect(t)
	stx, err := snap.BeginTx(context.Background(), pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stx.Exec(context.Background(), "SELECT count(*) FROM public.photos"); err != nil {
		t.Fatal(err)
	}
	x.b.delay.Store(0)
	p = s.runProcess(t)
	integration.WaitFor(t, 90*time.Second, "the index build waiting", func() bool {
		return queryInt(t, s.conn, `SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'CREATE INDEX CONCURRENTLY%' AND wait_event_type IS NOT NULL`) > 0 &&
			queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.switches WHERE state = 'indexing'") == 1
	})
	p.signal(t, syscall.SIGKILL)
	s.exec(t, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'CREATE INDEX CONCURRENTLY%' AND pid <> pg_backend_pid()")
	if err := stx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	integration.WaitFor(t, 30*time.Second, "an invalid index left", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pg_index WHERE indrelid = 'public.vecs'::regclass AND NOT indisvalid") == 1
	})

	// Phase 3: killed inside the switch transaction: a row of the rule's
	// stored results is held, so the transaction waits at its bookkeeping.
	holder := s.db.Connect(t)
	tx, err := holder.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(context.Background(), "SELECT FROM pgimageai.results WHERE rule = 'vec' LIMIT 1 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	p = s.runProcess(t)
	integration.WaitFor(t, 90*time.Second, "the switch transaction waiting", func() bool {
		return queryInt(t, s.conn, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'DELETE FROM pgimageai.results WHERE rule = $1'`) > 0
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
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pg_index WHERE indrelid = 'public.vecs'::regclass AND NOT indisvalid"); n != 0 {
		t.Errorf("%d invalid indexes left after the index was built again", n)
	}

	// The fourth run switches.
	s.runProcess(t)
	x.waitOutcome(t, "switched", 90*time.Second)
	s.sync(t, 30*time.Second)
	x.checkSwitched(t, sm, 2, 16, 150)
	x.checkIndex(t)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pg_index WHERE indrelid = 'public.vecs'::regclass"); n != 2 {
		t.Errorf("public.vecs has %d indexes after the switch, want 2 (its key and the HNSW index)", n)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.switch_history WHERE rule = 'vec'"); n != 1 {
		t.Errorf("%d switch history rows, want 1", n)
	}
	// Never paid twice for a stored row: what the first run stored was not
	// asked again; calls in flight at each kill while computing (at most max_concurrency)
	// and one probe for the shadow column's type are the only extra.
	if n, max := x.b.calls.Load(), int64(150+4+4+1); n > max {
		t.Errorf("model b was called %d times (%d at the first kill, %d stored then), want at most %d", n, callsAtKill, stored, max)
	}
}
