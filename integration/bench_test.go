package integration_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/metrics"
	"github.com/pgimageai/pgimageai/provider"
)

// instant is a provider that answers at once, without HTTP: the pipeline's
// own cost.
type instant struct{}

func (instant) GenerateText(_ context.Context, img provider.Image, _ string) (provider.Completion, error) {
	return provider.Completion{Text: fmt.Sprintf("%s of %d bytes", img.MIME, len(img.Data))}, nil
}

// BenchmarkStream measures rows per second from INSERT to committed result,
// b.N rows in transactions of 10. Run it with scripts/bench.
func BenchmarkStream(b *testing.B) {
	b.Run("provider=instant", func(b *testing.B) {
		benchStream(b, 0, 8, true, nil)
	})
	b.Run("provider=instant/metrics=on", func(b *testing.B) {
		benchStream(b, 0, 8, true, metrics.New())
	})
	b.Run("provider=http-200ms/max_concurrency=32", func(b *testing.B) {
		benchStream(b, 200*time.Millisecond, 32, false, nil)
	})
}

func benchStream(b *testing.B, latency time.Duration, concurrency int, inProcess bool, m *metrics.Metrics) {
	s := newSource(b)
	ai := newFakeAI(b)
	ai.Set(latency, nil)
	cfg := s.config(b)
	cfg.Logger = nil
	cfg.Metrics = m
	if inProcess {
		cfg.Registry.Register("instant", func(provider.Model, provider.Env) (provider.Provider, error) { return instant{}, nil })
		s.exec(b, `INSERT INTO pgimageai.models (name, provider, model) VALUES ('vision', 'instant', 'x')`)
	} else {
		s.model(b, "vision", ai, fmt.Sprintf(`{"max_concurrency": %d}`, concurrency))
	}
	s.rule(b, "caption", "vision", "public.captions", "caption")
	// A first run creates the slot and the target; the rows are written while
	// the bridge is stopped, so the clock sees only the stream's work.
	_, stop := s.start(b, cfg)
	s.sync(b, 60*time.Second)
	if err := stop(); err != nil {
		b.Fatal(err)
	}
	want := map[int]string{}
	insertRows(b, s, 1, b.N+1, 10, want)
	b.ResetTimer()
	start := time.Now()
	s.start(b, cfg)
	s.sync(b, 30*time.Minute)
	elapsed := time.Since(start)
	b.StopTimer()
	if n := queryInt(b, s.conn, "SELECT count(*) FROM public.captions"); n != b.N {
		b.Fatalf("%d results for %d rows", n, b.N)
	}
	rate := float64(b.N) / elapsed.Seconds()
	b.ReportMetric(rate, "rows/s")
	if latency > 0 {
		ideal := float64(concurrency) / latency.Seconds()
		b.ReportMetric(ideal, "ideal-rows/s")
		b.ReportMetric(rate/ideal, "ratio")
	}
}

// BenchmarkLargeTransaction streams ONE transaction of 10,000 rows of 100 KB
// images (1 GB) through `pgimageai run` with a 64 MiB byte budget and reports
// the process's peak RSS. Run it with scripts/bench (it takes minutes).
func BenchmarkLargeTransaction(b *testing.B) {
	if b.N > 1 {
		b.Skip("one iteration is the whole measurement; run with -benchtime=1x") // ok-to-skip: benchmark shape
	}
	s := newSource(b)
	ai := newFakeAI(b)
	ai.Set(5*time.Millisecond, nil)
	s.model(b, "vision", ai, `{"max_concurrency": 16}`)
	s.rule(b, "caption", "vision", "public.captions", "caption")
	const rows, size = 10000, 100 << 10
	addr := freeAddr(b)
	p := s.runProcess(b, "PGIMAGEAI_BYTE_BUDGET="+strconv.Itoa(64<<20), "PGIMAGEAI_METRICS_ADDR="+addr)
	// The byte budget in use, as the metrics report it, sampled meanwhile.
	var peakFlight, peakLag atomic.Int64
	sampling, stopSampling := context.WithCancel(context.Background())
	defer stopSampling()
	go func() {
		for sampling.Err() == nil {
			for name, v := range gauges("http://"+addr, "pgimageai_bytes_in_flight", "pgimageai_replication_lag_bytes") {
				peak := map[string]*atomic.Int64{"pgimageai_bytes_in_flight": &peakFlight, "pgimageai_replication_lag_bytes": &peakLag}[name]
				for cur := peak.Load(); int64(v) > cur && !peak.CompareAndSwap(cur, int64(v)); cur = peak.Load() {
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	start := time.Now()
	s.exec(b, fmt.Sprintf(`INSERT INTO public.photos (id, img)
SELECT i, '\x89504e470d0a1a0a'::bytea || decode(repeat(md5(i::text), %d), 'hex')
FROM generate_series(1, %d) i`, size/16, rows))
	b.Logf("inserted %d rows of %d KB in one transaction in %s", rows, size>>10, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	s.sync(b, 30*time.Minute)
	elapsed := time.Since(start)
	hwm := vmHWM(b, p.cmd.Process.Pid)
	stopSampling()
	if err := p.signal(b, syscall.SIGTERM); err != nil {
		b.Fatalf("graceful stop: %v", err)
	}
	if n := queryInt(b, s.conn, "SELECT count(*) FROM public.captions WHERE caption IS NOT NULL"); n != rows {
		b.Fatalf("%d results, want %d", n, rows)
	}
	logb, _ := os.ReadFile(p.log.Name())
	if strings.Contains(string(logb), "reconnect") {
		b.Errorf("the stream reconnected during the large transaction:\n%s", logb)
	}
	b.ReportMetric(float64(hwm)/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(float64(peakFlight.Load())/(1<<20), "peak-in-flight-MiB")
	b.ReportMetric(float64(rows)/elapsed.Seconds(), "rows/s")
	b.Logf("1 GB transaction: %s, peak RSS %.1f MiB with a 64 MiB byte budget (peak bytes_in_flight %.1f MiB, peak replication_lag_bytes %.1f MiB), %d requests",
		elapsed.Round(time.Second), float64(hwm)/(1<<20), float64(peakFlight.Load())/(1<<20), float64(peakLag.Load())/(1<<20), ai.Count())
}

// BenchmarkLargeEmbeddingTransaction measures `pgimageai run` on 100,000
// AI_IMAGE_EMBED results of 1,536 dimensions in ONE source transaction at the
// default byte budget (256 MiB): its peak RSS against budget + 64 MiB, and the
// rows per second.
func BenchmarkLargeEmbeddingTransaction(b *testing.B) {
	if b.N > 1 {
		b.Skip("one iteration is the whole measurement; run with -benchtime=1x") // ok-to-skip: benchmark shape
	}
	s := newSource(b)
	srv, calls := newFakeEmbedder(b, "m", wideVector(1536))
	s.exec(b, `INSERT INTO pgimageai.models (name, provider, base_url, model, options) VALUES ('emb', 'vllm', $1, 'm', '{"max_concurrency": 32}')`, srv.URL+"/v1")
	s.exec(b, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, target_table, target_column)
VALUES ('embed', 'public.photos', 'img', 'AI_IMAGE_EMBED', 'emb', 'public.vectors', 'v')`)
	const rows = 100000
	p := s.runProcess(b)
	start := time.Now()
	s.exec(b, fmt.Sprintf(`INSERT INTO public.photos (id, img) SELECT i, '\x89504e470d0a1a0a'::bytea || int4send(i) FROM generate_series(1, %d) AS i`, rows))
	s.sync(b, 30*time.Minute)
	elapsed := time.Since(start)
	hwm := vmHWM(b, p.cmd.Process.Pid)
	if err := p.signal(b, syscall.SIGTERM); err != nil {
		b.Fatalf("graceful stop: %v", err)
	}
	if n := queryInt(b, s.conn, "SELECT count(*) FROM public.vectors WHERE array_length(v, 1) = 1536"); n != rows {
		b.Fatalf("%d vectors, want %d", n, rows)
	}
	b.ReportMetric(float64(hwm)/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(float64(rows)/elapsed.Seconds(), "rows/s")
	b.Logf("%d embeddings of 1536 dimensions in one transaction: %s, peak RSS %.1f MiB with the default 256 MiB budget, %d calls",
		rows, elapsed.Round(time.Second), float64(hwm)/(1<<20), calls.Load())
}

// gauges reads the named series from a /metrics endpoint, quietly: it runs
// beside the test, where failing is not allowed.
func gauges(base string, names ...string) map[string]float64 {
	out := map[string]float64{}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		for _, n := range names {
			if rest, ok := strings.CutPrefix(sc.Text(), n+" "); ok {
				if v, err := strconv.ParseFloat(rest, 64); err == nil {
					out[n] = v
				}
			}
		}
	}
	return out
}

// vmHWM returns a process's peak resident set size in bytes.
func vmHWM(tb testing.TB, pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return kb << 10
		}
	}
	tb.Fatal("no VmHWM")
	return 0
}
