package integration_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// BenchmarkSoak is months of operation compressed into minutes: a real
// `pgimageai run` beside PostgreSQL through rounds of the churn a database
// sees over time (soakLoad), then the figures that must come back when the
// load stops. In every round, at the same time:
//
//   - a rule is created on a table of its own, with a model of its own,
//     answered (backfill and stream), then deleted with its model, and its
//     source and target dropped;
//   - a rule on a slow model gets calls in flight, then it is deleted and its
//     target dropped under them;
//   - rows with an empty image and with unknown bytes go to pgimageai.errors,
//     are fixed (the errors rows resolved), then deleted;
//
// and throughout, a rule streams steady inserts, updates and deletes, and a
// write-back table is used as a queue (rows inserted, the bridge writes their
// caption into the same row, the caption's reader deletes them).
//
// It samples after a warm-up round and again once the load stopped and the
// slot confirmed a message emitted after it: goroutines, the bridge's
// connections, RSS, open files, /metrics series, the pgimageai.* tables and
// the slot's lag. It fails when what must come back does not (goroutines,
// connections, one lane checkpoint per live lane, the slot's lag, the series
// of deleted rules and models); RSS and table sizes are reported. Rounds:
// PGIMAGEAI_SOAK_ROUNDS (default 100, each at least soakRound long: about
// four minutes in all). Run it with scripts/bench.
func BenchmarkSoak(b *testing.B) {
	if b.N > 1 {
		b.Skip("one iteration is the whole measurement; run with -benchtime=1x") // ok-to-skip: benchmark shape
	}
	rounds := 100
	if v := os.Getenv("PGIMAGEAI_SOAK_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("PGIMAGEAI_SOAK_ROUNDS=%q: want a positive number", v)
		}
		rounds = n
	}
	k := newSoak(b)

	// Warm-up: one round, so that every pool, cache and steady lane exists.
	k.run(b, 0, 1)
	k.catchUp(b)
	time.Sleep(2 * time.Second)
	start := k.sample(b, "start")

	began, cpu0 := time.Now(), procCPU(b, k.p.cmd.Process.Pid)
	calls0 := k.fast.Count() + k.slow.Count()
	k.run(b, 1, 1+rounds)
	loadTime, loadCPU := time.Since(began), procCPU(b, k.p.cmd.Process.Pid)-cpu0
	k.catchUp(b)
	calls := k.fast.Count() + k.slow.Count() - calls0

	// What must come back may take a moment: a retired lane's goroutine and
	// connection end once it drained, idle HTTP connections of deleted
	// models close after net/http's 90 s idle timeout.
	back := time.Now()
	var end soakSample
	for i := 0; ; i++ {
		end = k.sample(b, "end")
		pending := k.notBack(start, end)
		if i == 0 && len(pending) > 0 {
			b.Logf("right after the catch-up, not back yet: %s", strings.Join(pending, "; "))
		}
		if len(pending) == 0 || time.Since(back) > 2*time.Minute {
			break
		}
		time.Sleep(5 * time.Second)
	}
	backAfter := time.Since(back)
	cpu1 := procCPU(b, k.p.cmd.Process.Pid)
	time.Sleep(10 * time.Second)
	idleCPU := procCPU(b, k.p.cmd.Process.Pid) - cpu1
	hwm := vmHWM(b, k.p.cmd.Process.Pid)

	b.Logf("soak: %d rounds in %s, %d provider calls, %d lanes retired; the bridge's CPU %.1f s over the load, %.1f ms per second idle; peak RSS %.1f MiB",
		rounds, loadTime.Round(time.Second), calls, k.logCount(b, "lane retired"), loadCPU.Seconds(), float64(idleCPU.Milliseconds())/10, float64(hwm)/(1<<20))
	b.Logf("soak figures (end sampled %s after the catch-up; profiles and scrapes in %s):\n%s",
		backAfter.Round(time.Second), k.dir, soakTable(start, end))
	for _, f := range k.notBack(start, end) {
		b.Errorf("did not come back: %s", f)
	}
	if left := seriesLeft(end); len(left) > 0 {
		b.Errorf("/metrics still has the series of %d deleted rules, models or lanes, e.g.\n  %s", len(left), strings.Join(left[:min(len(left), 5)], "\n  "))
	}
	for _, f := range k.leftovers(b, end) {
		b.Errorf("left behind: %s", f)
	}
	if err := k.p.signal(b, syscall.SIGTERM); err != nil {
		b.Errorf("graceful stop after the soak: %v", err)
	}

	report := func(name string, unit string) {
		b.ReportMetric(end.v[name], unit)
	}
	report("goroutines", "goroutines")
	report("connections", "connections")
	report("rss_mib", "RSS-MiB")
	report("open_fds", "fds")
	report("metrics_series", "series")
	report("slot_lag_bytes", "slot-lag-B")
	b.ReportMetric(end.v["goroutines"]/start.v["goroutines"], "goroutines-ratio")
	b.ReportMetric(end.v["rss_mib"]/start.v["rss_mib"], "RSS-ratio")
	b.ReportMetric(float64(hwm)/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(float64(calls), "calls")
	b.ReportMetric(loadCPU.Seconds()*1e6/float64(max(calls, 1)), "CPU-µs/call")
	b.ReportMetric(float64(idleCPU.Milliseconds())/10, "idle-CPU-ms/s")
}

// soak is the benchmark's bridge process, providers and counters.
type soak struct {
	s          *source
	p          *process
	fast, slow *fakeAI
	metrics    string // base URL of /metrics
	pprof      string // base URL of /debug/pprof/
	dir        string // where the profiles and scrapes are kept
	seed       atomic.Int64
	dequeued   atomic.Int64
}

const (
	soakApp   = "pgimageai-soak" // application_name of the bridge's connections
	soakDelay = 1500 * time.Millisecond
	soakRound = 1500 * time.Millisecond // a round's least length: the steady load's share
)

// newSoak makes the tables and rules that live throughout and starts
// `pgimageai run` with metrics and pprof on loopback.
func newSoak(b *testing.B) *soak {
	s := newSource(b)
	k := &soak{s: s, fast: newFakeAI(b), slow: newFakeAI(b)}
	k.fast.Set(5*time.Millisecond, nil)
	k.slow.Set(soakDelay, nil)
	dir, err := os.MkdirTemp("", "pgimageai-soak-")
	if err != nil {
		b.Fatal(err)
	}
	k.dir = dir
	s.model(b, "steady", k.fast, `{"max_concurrency": 8}`)
	s.model(b, "slow", k.slow, `{"max_concurrency": 5}`)
	s.rule(b, "steady", "steady", "public.steady_out", "caption")
	s.exec(b, `CREATE TABLE public.queue (id bigserial PRIMARY KEY, img bytea NOT NULL, caption text)`)
	s.exec(b, `CREATE TABLE public.flaky (id int PRIMARY KEY, img bytea)`)
	for _, r := range [][3]string{{"queue", "public.queue", "public.queue"}, {"flaky", "public.flaky", "public.flaky_out"}} {
		s.exec(b, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ($1, $2, 'img', 'AI_IMAGE_COMPLETE', 'steady', 'Describe the image', $3, 'caption')`, r[0], r[1], r[2])
	}
	metricsAddr, pprofAddr := freeAddr(b), freeAddr(b)
	k.metrics, k.pprof = "http://"+metricsAddr, "http://"+pprofAddr
	k.p = s.runProcess(b, "PGIMAGEAI_DSN="+s.db.DSN()+"&application_name="+soakApp,
		"PGIMAGEAI_METRICS_ADDR="+metricsAddr, "PGIMAGEAI_PPROF_ADDR="+pprofAddr)
	return k
}

// run runs rounds [from, to) with the steady stream and the queue going on
// throughout, and fails b with the first error.
func (k *soak) run(b *testing.B, from, to int) {
	b.Helper()
	conns := make([]*pgx.Conn, 6)
	for i := range conns {
		conns[i] = k.s.db.Connect(b)
	}
	ctx, stop := context.WithCancel(context.Background())
	var mu sync.Mutex
	var errs []error
	fail := func(err error) {
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}
	var wg sync.WaitGroup
	background := func(f func(context.Context) error) {
		wg.Add(1)
		go func() { defer wg.Done(); fail(quiet(ctx, f(ctx))) }()
	}
	background(func(ctx context.Context) error { return k.steady(ctx, conns[0]) })
	background(func(ctx context.Context) error { return k.enqueue(ctx, conns[1]) })
	background(func(ctx context.Context) error { return k.dequeue(ctx, conns[2]) })
	for r := from; r < to; r++ {
		next := time.After(soakRound)
		var round sync.WaitGroup
		for i, f := range []func(context.Context, *pgx.Conn, int) error{k.churnRule, k.dropInFlight, k.churnErrors} {
			round.Add(1)
			go func() { defer round.Done(); fail(f(ctx, conns[3+i], r)) }()
		}
		round.Wait()
		mu.Lock()
		failed := len(errs) > 0
		mu.Unlock()
		if failed {
			break
		}
		<-next
	}
	stop()
	wg.Wait()
	if len(errs) > 0 {
		b.Fatal(errors.Join(errs...))
	}
}

// quiet drops the error of a loop that ended because ctx did.
func quiet(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// catchUp waits until the slot confirmed a message emitted now, then until
// the queue's reader took every row (each must have got its caption).
func (k *soak) catchUp(b *testing.B) {
	b.Helper()
	k.s.sync(b, 3*time.Minute)
	if n := queryInt(b, k.s.conn, `SELECT count(*) FROM public.queue WHERE caption IS NULL`); n != 0 {
		b.Errorf("%d queue rows without their caption after the catch-up", n)
	}
	k.s.exec(b, `DELETE FROM public.queue`)
}

// steady streams through the rule that runs throughout: upserts of new
// images over 200 keys, every seventh step a delete, 20 a second.
func (k *soak) steady(ctx context.Context, conn *pgx.Conn) error {
	for i := 0; ctx.Err() == nil; i++ {
		id := i%200 + 1
		var err error
		if i%7 == 6 {
			_, err = conn.Exec(ctx, `DELETE FROM public.photos WHERE id = $1`, id)
		} else {
			_, err = conn.Exec(ctx, `INSERT INTO public.photos (id, img) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET img = excluded.img`,
				id, pngImage(nil, 1_000_000+int(k.seed.Add(1))))
		}
		if err != nil {
			return fmt.Errorf("steady stream: %w", err)
		}
		sleep(ctx, 50*time.Millisecond)
	}
	return nil
}

// enqueue inserts two queue rows every 100 ms.
func (k *soak) enqueue(ctx context.Context, conn *pgx.Conn) error {
	for ctx.Err() == nil {
		if _, err := conn.Exec(ctx, `INSERT INTO public.queue (img) VALUES ($1), ($2)`,
			pngImage(nil, 2_000_000+int(k.seed.Add(1))), pngImage(nil, 2_000_000+int(k.seed.Add(1)))); err != nil {
			return fmt.Errorf("enqueue: %w", err)
		}
		sleep(ctx, 100*time.Millisecond)
	}
	return nil
}

// dequeue deletes the queue rows the bridge wrote back a caption into.
func (k *soak) dequeue(ctx context.Context, conn *pgx.Conn) error {
	for ctx.Err() == nil {
		tag, err := conn.Exec(ctx, `DELETE FROM public.queue WHERE caption IS NOT NULL`)
		if err != nil {
			return fmt.Errorf("dequeue: %w", err)
		}
		k.dequeued.Add(tag.RowsAffected())
		sleep(ctx, 250*time.Millisecond)
	}
	return nil
}

// churnRule creates round r's rule, source, target and model, waits for its
// backfill and stream results, then deletes and drops all four.
func (k *soak) churnRule(ctx context.Context, conn *pgx.Conn, r int) error {
	src, dst, rule, model := fmt.Sprintf("public.churn_src_%d", r), fmt.Sprintf("public.churn_out_%d", r), fmt.Sprintf("churn_%d", r), fmt.Sprintf("churn_m_%d", r)
	seed := 3_000_000 + r*100
	steps := []struct {
		sql  string
		args []any
	}{
		{`CREATE TABLE ` + src + ` (id int PRIMARY KEY, img bytea)`, nil},
		{`INSERT INTO ` + src + ` (id, img) SELECT i, $1::bytea || int4send(i) FROM generate_series(1, 10) i`, []any{pngImage(nil, seed)}},
		{`INSERT INTO pgimageai.models (name, provider, base_url, model, options) VALUES ($1, 'openai', $2, 'gpt-test', '{"max_concurrency": 4}')`, []any{model, k.fast.BaseURL()}},
		{`INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ($1, $2, 'img', 'AI_IMAGE_COMPLETE', $3, 'Describe the image', $4, 'caption')`, []any{rule, src, model, dst}},
	}
	for _, st := range steps {
		if _, err := conn.Exec(ctx, st.sql, st.args...); err != nil {
			return fmt.Errorf("round %d: %s: %w", r, st.sql, err)
		}
	}
	// The bridge creates the target with its key, then adds the column.
	if err := poll(ctx, conn, time.Minute, dst+".caption", `SELECT count(*)::int FROM pg_attribute
WHERE attrelid = to_regclass($1) AND attname = 'caption' AND NOT attisdropped`, []any{dst}, 1); err != nil {
		return err
	}
	if err := poll(ctx, conn, time.Minute, rule+"'s 10 backfilled results", `SELECT count(caption) FROM `+dst, nil, 10); err != nil {
		return err
	}
	var first string
	if err := conn.QueryRow(ctx, `SELECT caption FROM `+dst+` WHERE id = 1`).Scan(&first); err != nil {
		return fmt.Errorf("round %d: %w", r, err)
	}
	for _, sql := range []string{
		`INSERT INTO ` + src + ` (id, img) SELECT i, $1::bytea || int4send(i) FROM generate_series(11, 15) i`,
		`UPDATE ` + src + ` SET img = $1::bytea || int4send(100) WHERE id = 1`,
		`DELETE FROM ` + src + ` WHERE id = 2 AND $1::bytea IS NOT NULL`,
	} {
		if _, err := conn.Exec(ctx, sql, pngImage(nil, seed+1)); err != nil {
			return fmt.Errorf("round %d: %s: %w", r, sql, err)
		}
	}
	// 14 rows with a caption, none of id 2, id 1's new: 14.
	if err := poll(ctx, conn, time.Minute, rule+"'s streamed results", `SELECT count(caption)::int
  + CASE WHEN EXISTS (SELECT FROM `+dst+` WHERE id = 2) THEN 100 ELSE 0 END
  + CASE WHEN (SELECT caption FROM `+dst+` WHERE id = 1) IS DISTINCT FROM $1 THEN 0 ELSE 100 END FROM `+dst, []any{first}, 14); err != nil {
		return err
	}
	for _, sql := range []string{`DELETE FROM pgimageai.rules WHERE name = '` + rule + `'`, `DELETE FROM pgimageai.models WHERE name = '` + model + `'`,
		`DROP TABLE ` + dst, `DROP TABLE ` + src} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("round %d: %s: %w", r, sql, err)
		}
	}
	return nil
}

// dropInFlight gives round r's rule on the slow model five calls in flight,
// then deletes the rule and drops its target and source under them.
func (k *soak) dropInFlight(ctx context.Context, conn *pgx.Conn, r int) error {
	src, dst, rule := fmt.Sprintf("public.drop_src_%d", r), fmt.Sprintf("public.drop_out_%d", r), fmt.Sprintf("drop_%d", r)
	for _, sql := range []string{
		`CREATE TABLE ` + src + ` (id int PRIMARY KEY, img bytea)`,
		`INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('` + rule + `', '` + src + `', 'img', 'AI_IMAGE_COMPLETE', 'slow', 'Describe the image', '` + dst + `', 'caption')`,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("round %d: %s: %w", r, sql, err)
		}
	}
	before := k.slow.Count()
	if _, err := conn.Exec(ctx, `INSERT INTO `+src+` (id, img) SELECT i, $1::bytea || int4send(i) FROM generate_series(1, 5) i`,
		pngImage(nil, 4_000_000+r)); err != nil {
		return fmt.Errorf("round %d: %w", r, err)
	}
	deadline := time.Now().Add(time.Minute)
	for k.slow.Count() < before+5 {
		if time.Now().After(deadline) {
			return fmt.Errorf("round %d: %d of %s's 5 calls made after a minute", r, k.slow.Count()-before, rule)
		}
		sleep(ctx, 20*time.Millisecond)
	}
	for _, sql := range []string{`DELETE FROM pgimageai.rules WHERE name = '` + rule + `'`, `DROP TABLE IF EXISTS ` + dst, `DROP TABLE ` + src} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("round %d: %s: %w", r, sql, err)
		}
	}
	return nil
}

// churnErrors writes round r's four bad images to public.flaky (empty and
// unknown bytes: four open errors rows), fixes them (the rows resolved, four
// results) and deletes them.
func (k *soak) churnErrors(ctx context.Context, conn *pgx.Conn, r int) error {
	lo, hi := r*4+1, r*4+4
	if _, err := conn.Exec(ctx, `INSERT INTO public.flaky (id, img) VALUES ($1, ''), ($1 + 1, '\x0102030405'), ($1 + 2, '\x00'), ($1 + 3, 'GIF88a not an image')`, lo); err != nil {
		return fmt.Errorf("round %d: bad images: %w", r, err)
	}
	open := `SELECT count(*) FROM pgimageai.errors WHERE rule = 'flaky' AND resolved_at IS NULL AND (source_key->>'id')::int BETWEEN $1 AND $2`
	if err := poll(ctx, conn, time.Minute, fmt.Sprintf("round %d's 4 open errors", r), open, []any{lo, hi}, 4); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `UPDATE public.flaky SET img = $1::bytea || int4send(id) WHERE id BETWEEN $2 AND $3`, pngImage(nil, 5_000_000+r), lo, hi); err != nil {
		return fmt.Errorf("round %d: fix images: %w", r, err)
	}
	if err := poll(ctx, conn, time.Minute, fmt.Sprintf("round %d's 4 fixed results", r),
		`SELECT count(*) FROM public.flaky_out WHERE caption IS NOT NULL AND id BETWEEN $1 AND $2`, []any{lo, hi}, 4); err != nil {
		return err
	}
	if err := poll(ctx, conn, time.Minute, fmt.Sprintf("round %d's errors resolved", r), open, []any{lo, hi}, 0); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `DELETE FROM public.flaky WHERE id BETWEEN $1 AND $2`, lo, hi); err != nil {
		return fmt.Errorf("round %d: %w", r, err)
	}
	return nil
}

// poll runs sql every 50 ms until it returns want, for at most timeout.
func poll(ctx context.Context, conn *pgx.Conn, timeout time.Duration, what, sql string, args []any, want int) error {
	deadline := time.Now().Add(timeout)
	var n int
	for {
		if err := conn.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if n == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s: %d, want %d", timeout, what, n, want)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
