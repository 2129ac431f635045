package integration_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/integration"
)

// The fast-path benchmarks put pgimageai next to what the machine
// allows in the same run: a backlog of fastRows rows of fastImage-byte unique,
// uncompressed images, an OpenAI-compatible server on loopback that answers
// at once, max_concurrency 32.
//
//   - catch-up: the limit is pg_recvlogical draining the same WAL (pgoutput,
//     binary, to /dev/null, inside the database's container) and a bare Go
//     client making the same calls with 32 workers, both at the same time:
//     rows / the slower of the two.
//   - backfill: the limit is a bare `COPY … TO STDOUT` of the table and the
//     bare client at the same time.
//
// Each reports rows/s, the ratio to its limit, the bridge's CPU µs per row
// (user + system time of the `pgimageai run` process over the whole run,
// start-up included) and its peak RSS.
const (
	fastRows    = 20000
	fastImage   = 8 + 16*512 // the PNG signature and 512 MD5 digests: 8,200 bytes
	fastWorkers = 32
	fastPrompt  = "Describe the image"
)

// fastImageOf returns row i's image, the same bytes as fastInsertSQL gives it.
func fastImageOf(i int) []byte {
	img := make([]byte, 0, fastImage)
	img = append(img, 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n')
	sum := md5.Sum([]byte(strconv.Itoa(i)))
	for range 512 {
		img = append(img, sum[:]...)
	}
	return img
}

const fastInsertSQL = `INSERT INTO public.photos (id, img)
SELECT i, '\x89504e470d0a1a0a'::bytea || decode(repeat(md5(i::text), 512), 'hex') FROM generate_series(1, $1) i`

// loopbackAI is an OpenAI-compatible /chat/completions that answers at
// once, the same for the bare client and pgimageai. It does the least a
// real server does before it can answer: it decodes the request's JSON and
// the image's base64, and checks that the image is a PNG.
type loopbackAI struct {
	srv   *httptest.Server
	calls atomic.Int64
}

func newLoopbackAI(tb testing.TB) *loopbackAI {
	ai := &loopbackAI{}
	answer := []byte(`{"id":"c","object":"chat.completion","created":1,"model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":"a grey test pattern"},"finish_reason":"stop"}],"usage":{"prompt_tokens":90,"completion_tokens":4,"total_tokens":94}}`)
	ai.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role    string `json:"role"`
				Content []struct {
					Type     string `json:"type"`
					Text     string `json:"text"`
					ImageURL struct {
						URL string `json:"url"`
					} `json:"image_url"`
				} `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil || len(req.Messages) != 1 || len(req.Messages[0].Content) != 2 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		b64, ok := strings.CutPrefix(req.Messages[0].Content[1].ImageURL.URL, "data:image/png;base64,")
		img, err := base64.StdEncoding.DecodeString(b64)
		if !ok || err != nil || len(img) != fastImage || !bytes.HasPrefix(img, []byte("\x89PNG")) {
			http.Error(w, "bad image", http.StatusBadRequest)
			return
		}
		ai.calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write(answer)
	}))
	tb.Cleanup(ai.srv.Close)
	return ai
}

// bareClient makes the calls for rows 1..n with workers goroutines, the
// least a client can do: the request body written in one pass (base64 into
// the JSON), the answer's text decoded. It returns how long that took.
func bareClient(tb testing.TB, base string, n, workers int) time.Duration {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	defer client.CloseIdleConnections()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var body bytes.Buffer
			for {
				i := int(next.Add(1))
				if i > n {
					return
				}
				img := fastImageOf(i)
				body.Reset()
				body.WriteString(`{"model":"gpt-test","messages":[{"role":"user","content":[{"type":"text","text":"` + fastPrompt + `"},{"type":"image_url","image_url":{"url":"data:image/png;base64,`)
				enc := base64.NewEncoder(base64.StdEncoding, &body)
				enc.Write(img)
				enc.Close()
				body.WriteString(`"}}]}]}`)
				resp, err := client.Post(base+"/chat/completions", "application/json", bytes.NewReader(body.Bytes()))
				if err != nil {
					errs <- err
					return
				}
				var out struct {
					Choices []struct {
						Message struct{ Content string } `json:"message"`
					} `json:"choices"`
				}
				err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out)
				resp.Body.Close()
				if err != nil || len(out.Choices) == 0 || out.Choices[0].Message.Content == "" {
					errs <- fmt.Errorf("answer: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		tb.Fatalf("bare client: %v", err)
	}
	return elapsed
}

// recvlogical runs pg_recvlogical inside the database's container on slot
// from its position to endpos, decoding with pgoutput as pgimageai does
// (binary tuples, messages), to /dev/null, and returns how long it took.
func recvlogical(tb testing.TB, s *source, slot, endpos string) time.Duration {
	u, err := url.Parse(s.db.DSN())
	if err != nil {
		tb.Fatal(err)
	}
	u.Host = "127.0.0.1:5432" // inside the container
	start := time.Now()
	out, err := exec.Command("docker", "exec", s.db.Postgres().ContainerID(),
		"/usr/lib/postgresql/17/bin/pg_recvlogical", "--start", "--no-loop", "-S", slot, "-d", u.String(),
		"-o", "proto_version=1", "-o", "publication_names="+s.slot, "-o", "binary=true", "-o", "messages=true",
		"-E", endpos, "-f", "/dev/null").CombinedOutput()
	if err != nil {
		tb.Fatalf("pg_recvlogical: %v\n%s", err, out)
	}
	return time.Since(start)
}

// copyOut reads the rule's columns of the whole table with COPY … TO STDOUT
// to nowhere and returns how long it took.
func copyOut(tb testing.TB, s *source) time.Duration {
	ctx := context.Background()
	conn := s.db.Connect(tb)
	defer conn.Close(ctx)
	start := time.Now()
	if _, err := conn.PgConn().CopyTo(ctx, io.Discard, "COPY (SELECT id, img FROM public.photos) TO STDOUT"); err != nil {
		tb.Fatal(err)
	}
	return time.Since(start)
}

// together runs a and b at the same time and returns their durations.
func together(a, b func() time.Duration) (ta, tb time.Duration) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); ta = a() }()
	tb = b()
	wg.Wait()
	return ta, tb
}

// procCPU returns a process's user + system CPU time so far.
func procCPU(tb testing.TB, pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		if tb == nil {
			panic(err)
		}
		tb.Fatal(err)
	}
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const hz = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / hz
}

// procSyscalls returns how many read and write system calls a process has
// made so far (/proc/PID/io: syscr + syscw).
func procSyscalls(tb testing.TB, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		tb.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok && (k == "syscr" || k == "syscw") {
			c, _ := strconv.ParseInt(v, 10, 64)
			n += c
		}
	}
	return n
}

// dbCPU returns the CPU time the database's container has used so far, from
// its cgroup (v1 cpuacct or v2 cpu.stat), and whether it could be read.
func dbCPU(s *source) (time.Duration, bool) {
	id := s.db.Postgres().ContainerID()
	for _, f := range []string{"/sys/fs/cgroup/cpuacct/docker/" + id + "/cpuacct.usage",
		"/sys/fs/cgroup/system.slice/docker-" + id + ".scope/cpu.stat", "/sys/fs/cgroup/docker/" + id + "/cpu.stat"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if strings.HasSuffix(f, "cpuacct.usage") {
			ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			return time.Duration(ns), err == nil
		}
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "usage_usec "); ok {
				us, err := strconv.ParseInt(rest, 10, 64)
				return time.Duration(us) * time.Microsecond, err == nil
			}
		}
	}
	return 0, false
}

// dbMeter measures, over a phase, the CPU per row of the database's
// container and of this process (the loopback server, and the bare client
// when it runs): the returned function gives them as text.
func dbMeter(s *source, rows int) func() string {
	start, ok := dbCPU(s)
	procs := containerProcs(s)
	self := procCPU(nil, os.Getpid())
	return func() string {
		end, ok2 := dbCPU(s)
		mine := fmt.Sprintf("test process (server, bare client) %.0f µs/row", float64((procCPU(nil, os.Getpid())-self).Microseconds())/float64(rows))
		if !ok || !ok2 {
			return "database unknown (no cgroup CPU account found), " + mine
		}
		return fmt.Sprintf("database %.0f µs/row (by process: %s), %s", float64((end-start).Microseconds())/float64(rows), procBreakdown(s, procs, end-start, rows), mine)
	}
}

// resetHWM resets a process's peak RSS to its current RSS (Linux's
// clear_refs 5), so that the next phase's peak is its own.
func resetHWM(tb testing.TB, pid int) {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		tb.Fatal(err)
	}
}

// fastReport reports one measurement of pgimageai against its limit; what
// names its metrics. syscalls counts the bridge's reads and writes.
func fastReport(b *testing.B, what string, rows int, elapsed, limit time.Duration, cpu time.Duration, syscalls, hwm int64) {
	rate, lim := float64(rows)/elapsed.Seconds(), float64(rows)/limit.Seconds()
	b.ReportMetric(rate/lim, what+"-ratio")
	b.ReportMetric(float64(cpu.Microseconds())/float64(rows), what+"-cpu-µs/row")
	b.ReportMetric(float64(hwm)/(1<<20), what+"-peak-RSS-MiB")
	b.Logf("%s: %d rows in %s = %.0f rows/s; limit %.0f rows/s; ratio %.2f; bridge CPU %.0f µs/row, %.1f system calls/row (reads, writes); peak RSS %.1f MiB",
		what, rows, elapsed.Round(time.Millisecond), rate, lim, rate/lim, float64(cpu.Microseconds())/float64(rows), float64(syscalls)/float64(rows), float64(hwm)/(1<<20))
}

// firstRow watches table from now on; the returned function gives how long
// after start its first row appeared.
func firstRow(tb testing.TB, s *source, table string, start time.Time) func() time.Duration {
	conn := s.db.Connect(tb)
	done := make(chan time.Duration, 1)
	go func() {
		defer conn.Close(context.Background())
		for {
			var n int
			err := conn.QueryRow(context.Background(), "SELECT count(*) FROM (SELECT FROM "+table+" LIMIT 1) t").Scan(&n)
			if err != nil || n > 0 {
				done <- time.Since(start)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return func() time.Duration { return <-done }
}

// waitCount waits until sql counts want rows; until then it may fail (a
// target table that the bridge has not created yet).
func waitCount(tb testing.TB, conn *pgx.Conn, sql string, want int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for {
		var n int
		err := conn.QueryRow(context.Background(), sql).Scan(&n)
		if err == nil && n >= want {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: %d of %d after %s (%v)", sql, n, want, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// BenchmarkFastPath measures catch-up and backfill of the backlog against
// their limits (see above). Run it with scripts/bench.
func BenchmarkFastPath(b *testing.B) {
	if b.N > 1 {
		b.Skip("one iteration is the whole measurement; run with -benchtime=1x") // ok-to-skip: benchmark shape
	}
	s := newSource(b)
	ctx := context.Background()
	s.exec(b, `ALTER TABLE public.photos ALTER COLUMN img SET STORAGE EXTERNAL`) // out of line, uncompressed
	ai := newLoopbackAI(b)
	base := ai.srv.URL + "/v1"
	s.exec(b, `INSERT INTO pgimageai.models (name, provider, base_url, model, options) VALUES ('vision', 'openai', $1, 'gpt-test', $2)`,
		base, fmt.Sprintf(`{"max_concurrency": %d}`, fastWorkers))
	s.exec(b, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('caption', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'vision', $1, 'public.captions', 'caption')`, fastPrompt)
	// PGIMAGEAI_BENCH_PROFILE=DIR saves a 5 s CPU profile of the bridge
	// from the start of each phase in DIR.
	metricsAddr := freeAddr(b)
	env := []string{"PGIMAGEAI_METRICS_ADDR=" + metricsAddr}
	// PGIMAGEAI_BENCH_PG_OPTIONS=OPTS runs the bridge with libpq options
	// OPTS in its DSN, e.g. "-c logical_decoding_work_mem=256MB" (a tuning
	// that the README describes); the limits are measured without.
	if opts := os.Getenv("PGIMAGEAI_BENCH_PG_OPTIONS"); opts != "" {
		u, err := url.Parse(s.db.DSN())
		if err != nil {
			b.Fatal(err)
		}
		q := u.Query()
		q.Set("options", opts)
		u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // pgx reads a "+" as itself
		env = append(env, "PGIMAGEAI_DSN="+u.String())
		b.Logf("the bridge's DSN has options %q", opts)
	}
	// PGIMAGEAI_BENCH_CONSOLE=1 runs the bridge with its web console open
	// (run --console-addr) and a reader as an open browser tab, only more
	// often: the overview every second, the rule's page every 5 seconds.
	if os.Getenv("PGIMAGEAI_BENCH_CONSOLE") != "" {
		consoleAddr := freeAddr(b)
		env = append(env, "PGIMAGEAI_CONSOLE_ADDR="+consoleAddr, "PGIMAGEAI_CONSOLE_TOKEN="+consoleToken)
		defer pollConsole(b, "http://"+consoleAddr)()
		b.Log("the console is open and polled")
	}
	// writes returns how many target transactions the bridge has committed.
	writes := func() int {
		v, ok := scrape(b, "http://"+metricsAddr)["pgimageai_batches_total"]
		if !ok {
			b.Fatal("no pgimageai_batches_total in the metrics")
		}
		return int(v)
	}
	profiles := os.Getenv("PGIMAGEAI_BENCH_PROFILE")
	pprofAddr := freeAddr(b)
	if profiles != "" {
		env = append(env, "PGIMAGEAI_PPROF_ADDR="+pprofAddr)
	}
	profile := func(name string) (wait func()) {
		if profiles == "" {
			return func() {}
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			// From the process's start: it listens soon after.
			var resp *http.Response
			var err error
			for range 200 {
				if resp, err = http.Get("http://" + pprofAddr + "/debug/pprof/profile?seconds=5"); err == nil {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			if err != nil {
				b.Logf("profile %s: %v", name, err)
				return
			}
			defer resp.Body.Close()
			f, err := os.Create(filepath.Join(profiles, name+".pprof"))
			if err == nil {
				_, err = io.Copy(f, resp.Body)
				f.Close()
			}
			if err != nil {
				b.Logf("profile %s: %v", name, err)
			}
		}()
		return func() { <-done }
	}
	// catchUp measures one backlog, written by insert while the bridge is
	// stopped, into table's rows, against its limit; it leaves the bridge
	// running.
	var p *process
	catchUp := func(what, table, target string, insert func()) {
		// The backlog, with a second slot at the same position for the limit.
		s.exec(b, `SELECT pg_create_logical_replication_slot('bench_limit', 'pgoutput')`)
		t0 := time.Now()
		insert()
		var endpos string
		if err := s.conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&endpos); err != nil {
			b.Fatal(err)
		}
		written := time.Since(t0)
		db := dbMeter(s, fastRows)
		tWAL, tCalls := together(func() time.Duration { return recvlogical(b, s, "bench_limit", endpos) },
			func() time.Duration { return bareClient(b, base, fastRows, fastWorkers) })
		s.exec(b, `SELECT pg_drop_replication_slot('bench_limit')`)
		b.Logf("%s: the backlog of %d rows of %d bytes written in %s; limit: pg_recvlogical %s, bare client %s (%d workers), at the same time; CPU: %s",
			what, fastRows, fastImage, written.Round(time.Millisecond), tWAL.Round(time.Millisecond), tCalls.Round(time.Millisecond), fastWorkers, db())
		calls := ai.calls.Load()
		start := time.Now()
		db = dbMeter(s, fastRows)
		first := firstRow(b, s, target, start)
		wait := profile(what)
		p = s.runProcess(b, env...)
		s.sync(b, 30*time.Minute)
		elapsed := time.Since(start)
		wait()
		firstAt := first()
		b.Logf("%s: the first result after %s; after it, %.0f rows/s = %.2f of the bare client's rate alone; CPU: %s; %d target transactions", what, firstAt.Round(time.Millisecond),
			float64(fastRows)/(elapsed-firstAt).Seconds(), tCalls.Seconds()/(elapsed-firstAt).Seconds(), db(), writes())
		cpu, hwm, syscalls := procCPU(b, p.cmd.Process.Pid), vmHWM(b, p.cmd.Process.Pid), procSyscalls(b, p.cmd.Process.Pid)
		if n := queryInt(b, s.conn, "SELECT count(*) FROM "+target+" WHERE caption = 'a grey test pattern'"); n != fastRows {
			b.Fatalf("%d results in %s, want %d", n, target, fastRows)
		}
		if n := ai.calls.Load() - calls; n != fastRows {
			b.Errorf("%d calls for %d rows", n, fastRows)
		}
		fastReport(b, what, fastRows, elapsed, max(tWAL, tCalls), cpu, syscalls, hwm)
		keepLog(b, p, what)
	}
	// A first run creates the slot, the publication and the targets.
	s.exec(b, `CREATE TABLE public.photos2 (id int PRIMARY KEY, img bytea);
ALTER TABLE public.photos2 ALTER COLUMN img SET STORAGE EXTERNAL`)
	s.exec(b, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('caption_small', 'public.photos2', 'img', 'AI_IMAGE_COMPLETE', 'vision', $1, 'public.captions_small', 'caption')`, fastPrompt)
	p = s.runProcess(b, env...)
	s.sync(b, time.Minute)
	if err := p.signal(b, syscall.SIGTERM); err != nil {
		b.Fatalf("graceful stop: %v", err)
	}
	b.ResetTimer()
	// The workload: the backlog in one statement. The walsender
	// decodes a transaction whole before it sends its first change, to
	// pg_recvlogical as to pgimageai; the limit runs the bare client
	// meanwhile, a pipeline cannot.
	catchUp("catch-up", "public.photos", "public.captions", func() { s.exec(b, fastInsertSQL, fastRows) })
	// The slot's restart point moves past the backlog (a running-xacts
	// record, confirmed), or the next start decodes it again: PostgreSQL
	// logs one every 15 s by itself.
	s.exec(b, `SELECT pg_log_standby_snapshot()`)
	s.sync(b, time.Minute)
	if err := p.signal(b, syscall.SIGTERM); err != nil {
		b.Fatalf("graceful stop: %v", err)
	}
	// The same backlog in 2,000 transactions of 10 rows, as an application
	// writes them: streamed as they are decoded.
	catchUp("catch-up-small-txns", "public.photos2", "public.captions_small", func() {
		for lo := 1; lo <= fastRows; lo += 10 {
			s.exec(b, `INSERT INTO public.photos2 (id, img)
SELECT i, '\x89504e470d0a1a0a'::bytea || decode(repeat(md5(i::text), 512), 'hex') FROM generate_series($1::int, $2::int) i`, lo, lo+9)
		}
	})

	// The backfill: a rule added to the running bridge, on the existing
	// rows (another prompt, so nothing is remembered). The limit is
	// measured while the bridge idles.
	db := dbMeter(s, fastRows)
	tRead, tCalls := together(func() time.Duration { return copyOut(b, s) },
		func() time.Duration { return bareClient(b, base, fastRows, fastWorkers) })
	b.Logf("backfill limit: COPY %s, bare client %s, at the same time; CPU: %s", tRead.Round(time.Millisecond), tCalls.Round(time.Millisecond), db())
	resetHWM(b, p.cmd.Process.Pid)
	cpu0, sys0 := procCPU(b, p.cmd.Process.Pid), procSyscalls(b, p.cmd.Process.Pid)
	calls := ai.calls.Load()
	db = dbMeter(s, fastRows)
	w0 := writes()
	start := time.Now()
	s.exec(b, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('caption2', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'vision', 'Describe the image again', 'public.captions2', 'caption')`)
	wait := profile("backfill")
	// The backfill's state, an index lookup, is polled until it is done;
	// counting the target's rows every 50 ms would cost the database a
	// scan of a growing table each time, CPU that the run measures.
	integration.WaitFor(b, 30*time.Minute, "the backfill of caption2", func() bool {
		return queryInt(b, s.conn, `SELECT count(*) FROM pgimageai.backfills WHERE rule = 'caption2' AND state = 'done'`) == 1
	})
	waitCount(b, s.conn, "SELECT count(*) FROM public.captions2 WHERE caption IS NOT NULL", fastRows, 30*time.Minute)
	elapsed := time.Since(start)
	wait()
	b.Logf("backfill: CPU: %s; %d target transactions", db(), writes()-w0)
	cpu, hwm := procCPU(b, p.cmd.Process.Pid)-cpu0, vmHWM(b, p.cmd.Process.Pid)
	syscalls := procSyscalls(b, p.cmd.Process.Pid) - sys0
	if err := p.signal(b, syscall.SIGTERM); err != nil {
		b.Fatalf("graceful stop: %v", err)
	}
	if n := ai.calls.Load() - calls; n != fastRows {
		b.Errorf("%d calls for %d rows", n, fastRows)
	}
	fastReport(b, "backfill", fastRows, elapsed, max(tRead, tCalls), cpu, syscalls, hwm)
	keepLog(b, p, "backfill")
}

// keepLog copies the bridge's log to PGIMAGEAI_BENCH_LOG/what.log when that
// is set.
func keepLog(b *testing.B, p *process, what string) {
	if dir := os.Getenv("PGIMAGEAI_BENCH_LOG"); dir != "" {
		logb, _ := os.ReadFile(p.log.Name())
		if err := os.WriteFile(filepath.Join(dir, what+".log"), logb, 0o644); err != nil {
			b.Log(err)
		}
	}
}
