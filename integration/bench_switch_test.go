package integration_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/internal/pgerr"
	"github.com/pgimageai/pgimageai/sink"
)

// BenchmarkSwitchLock measures what the switch transaction of a versioned
// embedding costs the table's readers: 100,000 rows (PGIMAGEAI_SWITCH_ROWS),
// a vector(8) live column with an HNSW index (cosine, m=16,
// ef_construction=64), a vector(16) shadow column filled and its HNSW index
// built; then, while a reader runs SELECT id ORDER BY emb <=> $1 LIMIT 10
// in a loop on a connection of its own, the switch runs in one transaction
// three times (switching back and forth, the shadow's index built again
// before each):
//
//   - plain: the Switch op alone, then the switch_history-like statement
//     reading sink.LockMillisSQL;
//   - bk-after: as the design orders it, the bookkeeping after the Switch:
//     the rule's 100,000 results deleted and the side rule's 100,000
//     renamed (on a results-like table), all under the target's lock;
//   - bk-before: the same bookkeeping queued before the Switch, so the
//     target's lock is taken only for the DDL and the commit.
//
// Figures per round: lock-ms (the server's, from just before the ALTER to
// the statement after the switch, sink.LockMillisSQL), tx-ms (the client's,
// BEGIN to COMMIT returned), and the reader's median latency outside the
// switch and its worst latency of the queries that overlapped it. One
// iteration is the whole measurement: run it with -benchtime 1x (scripts/bench).
func BenchmarkSwitchLock(b *testing.B) {
	if b.N > 1 {
		b.Skip("one iteration is the whole measurement; run with -benchtime=1x") // ok-to-skip: benchmark shape
	}
	rows := 100_000
	if v := os.Getenv("PGIMAGEAI_SWITCH_ROWS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("PGIMAGEAI_SWITCH_ROWS=%q: want a positive number", v)
		}
		rows = n
	}
	ctx := context.Background()
	db := integration.NewDatabase(b)
	conn, readConn := db.Connect(b), db.Connect(b)
	step := func(what string, sql ...string) {
		b.Helper()
		began := time.Now()
		for _, s := range sql {
			swExec(b, conn, s)
		}
		b.Logf("%s: %s", what, time.Since(began).Round(time.Millisecond))
	}
	randomVector := func(dim int) string {
		return "ARRAY[" + strings.TrimSuffix(strings.Repeat("random()::real, ", dim), ", ") + "]::real[]::vector"
	}
	// The HNSW graph fits in memory (no slow build path); no parallel build,
	// whose shared memory would not fit Docker's 64 MB /dev/shm.
	swExec(b, conn, "SET maintenance_work_mem = '256MB'")
	swExec(b, conn, "SET max_parallel_maintenance_workers = 0")
	step(fmt.Sprintf("%d rows", rows),
		"CREATE EXTENSION IF NOT EXISTS vector",
		"CREATE TABLE public.sw_bench (id int PRIMARY KEY, emb vector(8))",
		fmt.Sprintf("INSERT INTO public.sw_bench SELECT g, %s FROM generate_series(1, %d) g", randomVector(8), rows),
		// The pgimageai.results rows of the rule and of its side rule.
		"CREATE TABLE public.sw_bench_results (rule text, key int, version text, PRIMARY KEY (rule, key))",
		fmt.Sprintf("INSERT INTO public.sw_bench_results SELECT r, g, 'v' FROM generate_series(1, %d) g, (VALUES ('r'), ('r@v')) x (r)", rows))
	step("live HNSW index", "CREATE INDEX sw_bench_hnsw ON public.sw_bench USING hnsw (emb vector_cosine_ops) WITH (m = 16, ef_construction = 64)")
	table, err := catalog.Lookup(ctx, conn, "public.sw_bench")
	if err != nil {
		b.Fatal(err)
	}

	r := newSwReader(ctx, b, readConn, 8)
	defer r.stop()

	live, dim := "emb", 8
	for round, name := range []string{"plain", "bk-after", "bk-before"} {
		dim = 24 - dim // 8 → 16 → 8 → 16
		shadow := sink.ShadowName(live, fmt.Sprintf("%08x", round+1))
		began := time.Now()
		if err := sink.AddShadowColumn(ctx, conn, table, shadow, fmt.Sprintf("vector(%d)", dim)); err != nil {
			b.Fatal(err)
		}
		swExec(b, conn, fmt.Sprintf("UPDATE public.sw_bench SET %s = %s", pgx.Identifier{shadow}.Sanitize(), randomVector(dim)))
		swExec(b, conn, "VACUUM ANALYZE public.sw_bench")
		filled := time.Since(began)
		plans, err := sink.ShadowIndexes(ctx, conn, table, live, shadow)
		if err != nil {
			b.Fatal(err)
		}
		if err := sink.BuildShadowIndexes(ctx, conn, plans); err != nil {
			b.Fatal(err)
		}
		b.Logf("%s: shadow vector(%d) filled in %s, its HNSW built concurrently in %s", name, dim, filled.Round(time.Millisecond), (time.Since(began) - filled).Round(time.Millisecond))

		// The reader's latency outside the switch, then the switch.
		time.Sleep(3 * time.Second)
		bookkeeping := []string{
			"DELETE FROM public.sw_bench_results WHERE rule = 'r'",
			"UPDATE public.sw_bench_results SET rule = 'r' WHERE rule = 'r@v'",
			"INSERT INTO public.sw_bench_results SELECT 'r@v', key, 'v' FROM public.sw_bench_results WHERE rule = 'r'", // for the next round
		}
		var lockMs float64
		t0 := time.Now()
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			batch := &pgx.Batch{}
			if name == "bk-before" {
				for _, s := range bookkeeping {
					batch.Queue(s)
				}
			}
			sink.Switch{Table: table.Identifier(), Live: live, Shadow: shadow, Indexes: plans, LockTimeout: 5 * time.Second}.Queue(batch)
			if name == "bk-after" {
				for _, s := range bookkeeping {
					batch.Queue(s)
				}
			}
			n := batch.Len()
			batch.Queue("SELECT " + sink.LockMillisSQL) // where switch_history's lock_ms is taken
			br := tx.SendBatch(ctx, batch)
			defer br.Close()
			for range n {
				if _, err := br.Exec(); err != nil {
					return err
				}
			}
			if err := br.QueryRow().Scan(&lockMs); err != nil {
				return err
			}
			return br.Close()
		})
		t1 := time.Now()
		if err != nil {
			b.Fatalf("%s switch: %v", name, err)
		}
		time.Sleep(2 * time.Second)
		median, worst, during, queries := r.stats(t0, t1)
		if got := swColumnType(b, conn, "public.sw_bench", live); got != fmt.Sprintf("vector(%d)", dim) {
			b.Fatalf("%s: emb is %s after the switch, want vector(%d)", name, got, dim)
		}
		b.Logf("%s: lock %.2f ms (to the statement after the switch), transaction %.2f ms; reader: median %.2f ms over %d queries outside, worst %.2f ms of %d queries overlapping the switch",
			name, lockMs, ms(t1.Sub(t0)), median, queries, worst, during)
		b.ReportMetric(lockMs, name+"-lock-ms")
		b.ReportMetric(ms(t1.Sub(t0)), name+"-tx-ms")
		b.ReportMetric(median, name+"-reader-median-ms")
		b.ReportMetric(worst, name+"-reader-max-ms")
	}
	if err := r.stop(); err != nil {
		b.Fatal(err)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// swReader runs a nearest-neighbour query on its own connection in a loop
// and records each query's start and end. The query's vector has the
// column's dimension: when the switch changed it, the query fails once
// (pgvector: different vector dimensions) and goes on with the other.
type swReader struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	samples []swSample
	err     error
}

type swSample struct{ start, end time.Time }

func newSwReader(ctx context.Context, tb testing.TB, conn *pgx.Conn, dim int) *swReader {
	ctx, cancel := context.WithCancel(ctx)
	r := &swReader{cancel: cancel, done: make(chan struct{})}
	vector := func(dim int) string {
		parts := make([]string, dim)
		for i := range parts {
			parts[i] = fmt.Sprintf("0.%d", i+1)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	go func() {
		defer close(r.done)
		q := vector(dim)
		for ctx.Err() == nil {
			start := time.Now()
			rows, err := conn.Query(ctx, "SELECT id FROM public.sw_bench ORDER BY emb <=> $1::vector LIMIT 10", q)
			n := 0
			if err == nil {
				for rows.Next() {
					n++
				}
				err = rows.Err()
			}
			end := time.Now()
			if ctx.Err() != nil {
				return
			}
			r.mu.Lock()
			r.samples = append(r.samples, swSample{start, end})
			r.mu.Unlock()
			switch {
			case err != nil && pgerr.SQLState(err) == "22000" && strings.Contains(err.Error(), "dimensions"):
				dim = 24 - dim // the column switched: 8 ↔ 16
				q = vector(dim)
			case err != nil:
				r.mu.Lock()
				r.err = err
				r.mu.Unlock()
				return
			case n != 10:
				r.mu.Lock()
				r.err = fmt.Errorf("reader: %d rows, want 10", n)
				r.mu.Unlock()
				return
			}
		}
	}()
	return r
}

// stop ends the reader and returns its error, if any.
func (r *swReader) stop() error {
	r.cancel()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// stats returns, in milliseconds, the median latency of the queries that
// ended before t0 in the 3 seconds before it, and the worst of those that
// overlapped [t0, t1], with the counts.
func (r *swReader) stats(t0, t1 time.Time) (median, worst float64, during, before int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var outside []float64
	for _, s := range r.samples {
		d := ms(s.end.Sub(s.start))
		switch {
		case s.end.Before(t0) && s.start.After(t0.Add(-3*time.Second)):
			outside = append(outside, d)
		case s.start.Before(t1) && s.end.After(t0):
			worst = max(worst, d)
			during++
		}
	}
	if len(outside) > 0 {
		slices.Sort(outside)
		median = outside[len(outside)/2]
	}
	return median, worst, during, len(outside)
}
