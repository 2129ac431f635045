package integration_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The chaos measurement: random inserts, image updates,
// note-only updates, deletes and key moves (chaos_workload_test.go) against
// `pgimageai run`, SIGKILLed and restarted at random moments, with its
// walsender terminated at others. The target must end exactly right, and
// the provider may be asked at most once per image change plus
// perFaultCalls per fault: what a fault may cost is the calls in flight or
// answered and not yet committed when it hit.

// perFaultCalls is the calls a fault may add (the requirement).
const perFaultCalls = 16

// chaosRun is the shape of one chaos run.
type chaosRun struct {
	duration      time.Duration // of the workload, faults included
	kills         int           // SIGKILLs of the bridge, each followed by a restart
	terminations  int           // pg_terminate_backend of the walsender
	interval      time.Duration // mean pause between transactions
	minRows       int           // the workload inserts only while the table is smaller
	concurrency   int           // the model's max_concurrency
	providerDelay time.Duration // the provider answers after up to this long
}

// chaosFigures is what a run measured.
type chaosFigures struct {
	seed                uint64
	calls, imageChanges int
	kills, terminations int
	rows, txs           int
	ops                 [opKinds]int
	elapsed             time.Duration // from the start of the workload to the target in sync
}

func (f chaosFigures) faults() int { return f.kills + f.terminations }

func (f chaosFigures) bound() int { return f.imageChanges + perFaultCalls*f.faults() }

func (f chaosFigures) String() string {
	var ops []string
	for k, n := range f.ops {
		ops = append(ops, fmt.Sprintf("%d %ss", n, opKind(k)))
	}
	return fmt.Sprintf("seed %d: %d provider calls for %d image changes (%.3f calls per change), %d faults (%d SIGKILLs, %d walsender terminations), bound %d (%.1f extra calls per fault); %d transactions: %s; %d rows at the end; in sync %s after the workload started",
		f.seed, f.calls, f.imageChanges, float64(f.calls)/float64(max(f.imageChanges, 1)), f.faults(), f.kills, f.terminations,
		f.bound(), float64(f.calls-f.imageChanges)/float64(max(f.faults(), 1)), f.txs, strings.Join(ops, ", "), f.rows, f.elapsed.Round(time.Second))
}

// chaosSeed is PGIMAGEAI_CHAOS_SEED when set (to replay a run), else random.
func chaosSeed(tb testing.TB) uint64 {
	if v := os.Getenv("PGIMAGEAI_CHAOS_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			tb.Fatalf("PGIMAGEAI_CHAOS_SEED: %v", err)
		}
		return seed
	}
	return rand.Uint64()
}

// TestChaosNeverPayTwice: 20 s of random changes with 5 SIGKILLs
// and 2 walsender terminations at random moments; the target ends exactly
// right and the provider calls stay within image changes + 16 per fault.
// The longer measurement is BenchmarkChaos (scripts/bench).
func TestChaosNeverPayTwice(t *testing.T) {
	f := runChaos(t, chaosRun{duration: 20 * time.Second, kills: 5, terminations: 2,
		interval: 30 * time.Millisecond, minRows: 100, concurrency: 8, providerDelay: 30 * time.Millisecond})
	if f.kills != 5 || f.terminations != 2 {
		t.Errorf("%d SIGKILLs and %d walsender terminations happened, want 5 and 2", f.kills, f.terminations)
	}
	if f.imageChanges < 100 {
		t.Errorf("only %d image changes in 20 s: the workload hardly ran", f.imageChanges)
	}
}

// runChaos runs the workload and the faults of run, then checks the target
// and the calls; it returns the figures, also logged.
func runChaos(tb testing.TB, run chaosRun) chaosFigures {
	tb.Helper()
	seed := chaosSeed(tb)
	tb.Logf("chaos seed %d (PGIMAGEAI_CHAOS_SEED=%d replays the workload; the moments of the faults and the provider's delays vary)", seed, seed)
	s := newSource(tb)
	ai := newFakeAI(tb)
	ai.Set(0, func(r aiRequest) (int, string) {
		time.Sleep(time.Duration(rand.Int64N(int64(run.providerDelay) + 1)))
		return http.StatusOK, chaosCaption(r.DataURL)
	})
	s.model(tb, "vision", ai, fmt.Sprintf(`{"max_concurrency": %d}`, run.concurrency))
	s.rule(tb, "caption", "vision", "public.captions", "caption")
	p := s.runProcess(tb)

	w := newWorkload(s.db.Connect(tb), seed, run.interval)
	faults := chaosFaults(seed, run)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	t0 := time.Now()
	go func() { done <- w.run(ctx, tb, run.minRows) }()

	f := chaosFigures{seed: seed}
	failed := func() error {
		select {
		case err := <-done:
			done <- err
			if err == nil {
				return fmt.Errorf("the workload stopped early")
			}
			return err
		default:
			return nil
		}
	}
	for _, ft := range faults {
		time.Sleep(time.Until(t0.Add(ft.at)))
		if err := failed(); err != nil {
			stop()
			tb.Fatal(err)
		}
		if ft.kill {
			if err := p.signal(tb, syscall.SIGKILL); err == nil {
				tb.Fatal("pgimageai exited cleanly on SIGKILL: it had stopped before")
			}
			f.kills++
			time.Sleep(ft.down)
			p = s.runProcess(tb)
			continue
		}
		terminateWalsender(tb, s)
		f.terminations++
		s.waitStreamingAgain(tb, 2*time.Minute)
	}
	time.Sleep(time.Until(t0.Add(run.duration)))
	stop()
	if err := <-done; err != nil {
		tb.Fatal(err)
	}
	s.sync(tb, 5*time.Minute)
	f.elapsed = time.Since(t0)
	if err := p.signal(tb, syscall.SIGTERM); err != nil {
		tb.Errorf("graceful stop at the end: %v", err)
	}
	f.calls, f.imageChanges, f.ops, f.txs, f.rows = ai.Count(), w.imageChanges, w.ops, w.txs, len(w.rows)
	tb.Log(f)

	checkChaosSource(tb, s, w)
	checkChaosTarget(tb, s, w)
	if n := queryInt(tb, s.conn, "SELECT count(*) FROM pgimageai.errors"); n != 0 {
		tb.Errorf("%d errors rows", n)
	}
	explainCalls(tb, ai, w)
	if f.calls > f.bound() {
		tb.Errorf("%d provider calls for %d image changes and %d faults: more than the bound of %d (image changes + %d per fault)",
			f.calls, f.imageChanges, f.faults(), f.bound(), perFaultCalls)
	}
	return f
}

// terminateWalsender ends the walsender streaming s's slot with
// pg_terminate_backend, waiting for one to stream first; a walsender that
// ended by itself in between is looked up again.
func terminateWalsender(tb testing.TB, s *source) {
	tb.Helper()
	for range 5 {
		s.waitStreamingAgain(tb, 2*time.Minute)
		var ok bool
		if err := s.conn.QueryRow(context.Background(), "SELECT pg_terminate_backend($1)", s.walsenderPID(tb)).Scan(&ok); err != nil {
			tb.Fatal(err)
		}
		if ok {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	tb.Fatal("pg_terminate_backend of the walsender returned false 5 times")
}

// chaosFault is one fault of the schedule.
type chaosFault struct {
	at   time.Duration // after the workload started
	kill bool          // a SIGKILL, else a walsender termination
	down time.Duration // after a SIGKILL: how long the bridge stays down
}

// chaosFaults spreads run's faults at random moments over its duration,
// leaving its first and last second alone.
func chaosFaults(seed uint64, run chaosRun) []chaosFault {
	rng := rand.New(rand.NewPCG(seed, 15))
	var out []chaosFault
	span := int64(run.duration - 2*time.Second)
	for i := range run.kills + run.terminations {
		out = append(out, chaosFault{at: time.Second + time.Duration(rng.Int64N(span)), kill: i < run.kills,
			down: time.Duration(rng.Int64N(int64(500 * time.Millisecond)))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].at < out[j].at })
	return out
}

// checkChaosSource checks the workload's model against the source table:
// a test of the generator, whose model the target is compared with.
func checkChaosSource(tb testing.TB, s *source, w *workload) {
	tb.Helper()
	rows, err := s.conn.Query(context.Background(), "SELECT id, img FROM public.photos")
	if err != nil {
		tb.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var id int
		var img []byte
		if err := rows.Scan(&id, &img); err != nil {
			tb.Fatal(err)
		}
		n++
		if seed, ok := w.rows[id]; !ok || !bytes.Equal(w.bytes[seed], img) {
			tb.Fatalf("the workload's model is wrong at source row %d", id)
		}
	}
	if rows.Err() != nil {
		tb.Fatal(rows.Err())
	}
	if n != len(w.rows) {
		tb.Fatalf("source has %d rows, the workload's model %d", n, len(w.rows))
	}
}

// checkChaosTarget checks that the target is exactly right: one row per
// source row, with the caption of its current image, and no other row.
func checkChaosTarget(tb testing.TB, s *source, w *workload) {
	tb.Helper()
	got, want := captions(tb, s.conn), w.want()
	var missing, extra, wrong []int
	for id, c := range want {
		g, ok := got[id]
		switch {
		case !ok:
			missing = append(missing, id)
		case g != c:
			wrong = append(wrong, id)
		}
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			extra = append(extra, id)
		}
	}
	for _, l := range []*[]int{&missing, &extra, &wrong} {
		slices.Sort(*l)
	}
	if len(missing)+len(extra)+len(wrong) > 0 {
		tb.Errorf("target of %d rows for %d source rows: %d missing %v, %d deleted or moved away but present %v, %d with a caption not of the current image %v",
			len(got), len(want), len(missing), head(missing), len(extra), head(extra), len(wrong), head(wrong))
	}
}

func head(ids []int) []int { return ids[:min(len(ids), 10)] }

// explainCalls logs where the calls beyond one per image change went: each
// image is the bytes of exactly one image change, so an image asked for n
// times cost n-1 extra calls. They are grouped by what carried the image
// again after its change (note updates, key moves) — the kinds of change
// that could pay twice — or by nothing (only a fault can have repeated it).
func explainCalls(tb testing.TB, ai *fakeAI, w *workload) {
	tb.Helper()
	bySeed := make(map[string]int, len(w.images))
	for seed, img := range w.images {
		bySeed[img.dataURL] = seed
	}
	calls, foreign := requestsBy(ai, bySeed)
	if foreign != 0 {
		tb.Errorf("%d calls for images of no image change", foreign)
	}
	extra := map[string]int{}
	never := 0
	for seed, img := range w.images {
		n := calls[seed]
		if n == 0 {
			never++
			continue
		}
		if n == 1 {
			continue
		}
		var by []string
		for k, c := range img.carried {
			if c > 0 {
				by = append(by, opKind(k).String())
			}
		}
		why := "nothing"
		if len(by) > 0 {
			why = strings.Join(by, " + ")
		}
		extra[why] += n - 1
	}
	var parts []string
	for why, n := range extra {
		parts = append(parts, fmt.Sprintf("%d of images carried again by %s", n, why))
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		parts = []string{"none"}
	}
	tb.Logf("extra calls: %s; %d images never asked for", strings.Join(parts, "; "), never)
}
