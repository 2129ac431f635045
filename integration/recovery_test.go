package integration_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/magic"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// pgimageaiBinary builds cmd/pgimageai once per test binary.
func pgimageaiBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "pgimageai-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "pgimageai")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/pgimageai/pgimageai/cmd/pgimageai").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// process is a `pgimageai run` child process.
type process struct {
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed when the process exited; then err is set
	err  error
}

// signal sends sig and waits for the process to exit, returning its error.
func (p *process) signal(t testing.TB, sig syscall.Signal) error {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("pgimageai did not exit within 2m of %v", sig)
	}
	return p.err
}

func (s *source) runProcess(t testing.TB, extraEnv ...string) *process {
	t.Helper()
	logf, err := os.CreateTemp(t.TempDir(), "pgimageai-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(pgimageaiBinary(t), "run")
	cmd.Env = append(os.Environ(), "PGIMAGEAI_DSN="+s.db.DSN(), "PGIMAGEAI_SLOT="+s.slot, "PGIMAGEAI_PUBLICATION="+s.slot)
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, log: logf, done: make(chan struct{})}
	exited := make(chan error, 1)
	go func() {
		p.err = cmd.Wait()
		exited <- fmt.Errorf("pgimageai exited: %v", p.err)
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.signal(t, syscall.SIGKILL)
		}
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("pgimageai log:\n%s", b)
		}
	})
	s.waitStreaming(t, exited)
	return p
}

// insertRows inserts PNG rows ids [from, to) in transactions of per rows and
// returns each id's expected caption.
func insertRows(t testing.TB, s *source, from, to, per int, want map[int]string) {
	t.Helper()
	ctx := context.Background()
	for lo := from; lo < to; lo += per {
		b := &pgx.Batch{}
		for id := lo; id < min(lo+per, to); id++ {
			img := pngImage(t, id)
			want[id] = captionOf(magic.DataURL(magic.PNG, img))
			b.Queue("INSERT INTO public.photos (id, img) VALUES ($1, $2)", id, img)
		}
		if err := pgx.BeginFunc(ctx, s.conn, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() }); err != nil {
			t.Fatal(err)
		}
	}
}

// waitResults waits until public.captions exists and holds at least n rows.
func waitResults(t testing.TB, s *source, n int, what string) {
	t.Helper()
	integration.WaitFor(t, 60*time.Second, fmt.Sprintf("%d results %s", n, what), func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename = 'captions'") == 1 &&
			queryInt(t, s.conn, "SELECT count(*) FROM public.captions") >= n
	})
}

// assertRequestedOnceAfter checks that the requests after the first before
// ones asked for exactly the PNG rows of ids that were not committed (not in
// done), each once: what a restart or a failover must cost.
func assertRequestedOnceAfter(t testing.TB, ai *fakeAI, before int, done map[int]string, ids int) {
	t.Helper()
	after := ai.Requests()[before:]
	again := map[string]int{}
	for _, r := range after {
		again[r.DataURL]++
	}
	for id := 1; id <= ids; id++ {
		url := magic.DataURL(magic.PNG, pngImage(t, id))
		_, committed := done[id]
		switch {
		case committed && again[url] != 0:
			t.Errorf("row %d was committed before the fault but requested again", id)
		case !committed && again[url] != 1:
			t.Errorf("row %d: %d requests after the fault, want 1", id, again[url])
		}
	}
	if len(after) != ids-len(done) {
		t.Errorf("%d requests after the fault, want %d", len(after), ids-len(done))
	}
}

// captions reads the target table.
func captions(t testing.TB, conn *pgx.Conn) map[int]string {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT id, caption FROM public.captions")
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]string{}
	for rows.Next() {
		var id int
		var c *string
		if err := rows.Scan(&id, &c); err != nil {
			t.Fatal(err)
		}
		if c != nil {
			got[id] = *c
		} else {
			got[id] = "<NULL>"
		}
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	return got
}

func assertCaptions(t testing.TB, got, want map[int]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("target has %d rows, want %d", len(got), len(want))
	}
	bad := 0
	for id, w := range want {
		if got[id] != w {
			if bad++; bad <= 5 {
				t.Errorf("row %d: caption %q, want %q", id, got[id], w)
			}
		}
	}
}

// TestExactlyOnceAfterKill SIGKILLs `pgimageai run` in the middle of 2,000
// rows, restarts it, and checks that the target equals the expected result
// and that exactly the rows not yet committed at the kill were requested
// again.
func TestExactlyOnceAfterKill(t *testing.T) {
	s := newSource(t)
	ai := newFakeAI(t)
	ai.Set(50*time.Millisecond, nil)
	s.model(t, "vision", ai, `{"max_concurrency": 8}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	p1 := s.runProcess(t)
	want := map[int]string{}
	insertRows(t, s, 1, 2001, 20, want)
	waitResults(t, s, 400, "before the kill")
	p1.signal(t, syscall.SIGKILL)
	atKill := captions(t, s.conn)
	before := len(ai.Requests())
	if len(atKill) >= 2000 {
		t.Fatalf("the kill came too late: %d rows already done", len(atKill))
	}
	t.Logf("killed with %d of 2000 rows committed and %d requests made", len(atKill), before)

	p2 := s.runProcess(t)
	s.sync(t, 120*time.Second)
	if err := p2.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("graceful stop of the restarted bridge: %v", err)
	}
	assertCaptions(t, captions(t, s.conn), want)

	// After the restart, exactly the rows not committed at the kill were
	// requested, each once.
	assertRequestedOnceAfter(t, ai, before, atKill, 2000)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors"); n != 0 {
		t.Errorf("%d errors rows", n)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.checkpoints WHERE slot = $1", s.slot); n != 1 {
		t.Errorf("no checkpoint stored")
	}
}

// TestReconnect interrupts the stream mid-way — by terminating the walsender
// and by restarting PostgreSQL — and checks that the bridge reconnects alone,
// catches up, and calls the provider at most once per row plus those in flight.
func TestReconnect(t *testing.T) {
	tests := []struct {
		name      string
		interrupt func(t *testing.T, pg *integration.Postgres, s *source)
	}{
		{"terminate walsender", func(t *testing.T, _ *integration.Postgres, s *source) {
			n := queryInt(t, s.conn, "SELECT count(pg_terminate_backend(active_pid)) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL", s.slot)
			if n != 1 {
				t.Fatalf("terminated %d walsenders, want 1", n)
			}
		}},
		{"restart postgres", func(t *testing.T, pg *integration.Postgres, s *source) {
			ctx := context.Background()
			if err := pg.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			if err := pg.Start(ctx); err != nil {
				t.Fatal(err)
			}
			conn, err := pgx.Connect(ctx, s.db.DSN())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close(context.Background()) })
			s.conn = conn
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pg := integration.StartPostgres(t)
			s := newSourceOn(t, pg.NewDatabase(t))
			ai := newFakeAI(t)
			ai.Set(5*time.Millisecond, nil)
			const maxConcurrency = 8
			s.model(t, "vision", ai, fmt.Sprintf(`{"max_concurrency": %d}`, maxConcurrency))
			s.rule(t, "caption", "vision", "public.captions", "caption")
			s.start(t, s.config(t))
			want := map[int]string{}
			insertRows(t, s, 1, 501, 10, want)
			waitResults(t, s, 100, "before the interruption")
			tc.interrupt(t, pg, s)
			insertRows(t, s, 501, 1001, 10, want)
			s.sync(t, 120*time.Second)
			assertCaptions(t, captions(t, s.conn), want)
			distinct := map[string]bool{}
			for _, r := range ai.Requests() {
				distinct[r.DataURL] = true
			}
			if len(distinct) != 1000 {
				t.Errorf("%d distinct images requested, want 1000", len(distinct))
			}
			if n := ai.Count(); n > 1000+maxConcurrency {
				t.Errorf("%d requests for 1000 rows; at most %d allowed (rows plus those in flight)", n, 1000+maxConcurrency)
			}
			t.Logf("%d requests for 1000 rows", ai.Count())
		})
	}
}
