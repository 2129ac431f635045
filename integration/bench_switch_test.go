package integration_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/integration"
)

// BenchmarkSwitch100k switches an AI_IMAGE_EMBED rule of 100,000 rows
// from an 8-dimension model to a 16-dimension one (a vector(8) column with
// an HNSW index) through the bridge, while a reader runs a nearest-
// neighbour query in a loop. It reports how long the switch transaction
// held the target table's lock (pgimageai.switch_history.lock_ms, from the
// lock request to the end of its last statement), the reader's median and
// worst query time, the side computation's rows/s and the whole switch's
// duration.
func BenchmarkSwitch100k(b *testing.B) {
	const n = 100_000
	for range b.N {
		benchSwitch(b, n)
	}
}

func benchSwitch(b *testing.B, n int) {
	x := newSwitchSetup(b, n)
	s := x.s
	x.start(b)
	integration.WaitFor(b, 20*time.Minute, "100,000 vectors of model a", func() bool {
		return queryInt(b, s.conn, "SELECT count(*) FROM public.vecs WHERE v IS NOT NULL") == n
	})
	reader := s.db.Connect(b)
	type query struct{ began, ended time.Time }
	stop, done := make(chan struct{}), make(chan []query)
	go func() {
		var lat []query
		q := "SELECT id FROM public.vecs ORDER BY v <=> (SELECT v FROM public.vecs WHERE id = 1) LIMIT 10"
		for {
			select {
			case <-stop:
				done <- lat
				return
			default:
			}
			began := time.Now()
			rows, err := reader.Query(context.Background(), q, pgx.QueryExecModeSimpleProtocol)
			if err == nil {
				for rows.Next() {
				}
				rows.Close()
				err = rows.Err()
			}
			if err != nil {
				b.Errorf("reader: %v", err)
			}
			lat = append(lat, query{began, time.Now()})
			time.Sleep(2 * time.Millisecond)
		}
	}()
	began := time.Now()
	x.toB(b)
	integration.WaitFor(b, 30*time.Minute, "the switch", func() bool {
		return queryInt(b, s.conn, "SELECT count(*) FROM pgimageai.switch_history WHERE rule = 'vec' AND outcome = 'switched'") == 1
	})
	took := time.Since(began)
	close(stop)
	lat := <-done
	var lockMS float64
	var ended time.Time
	if err := s.conn.QueryRow(context.Background(), "SELECT lock_ms, ended_at FROM pgimageai.switch_history WHERE rule = 'vec'").Scan(&lockMS, &ended); err != nil {
		b.Fatal(err)
	}
	// The queries that overlapped the switch transaction's lock (from the
	// lock request to its last statement, and 50 ms for its commit).
	from, to := ended.Add(-time.Duration(lockMS*float64(time.Millisecond))), ended.Add(50*time.Millisecond)
	var all, during []time.Duration
	for _, q := range lat {
		d := q.ended.Sub(q.began)
		all = append(all, d)
		if q.began.Before(to) && q.ended.After(from) {
			during = append(during, d)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	sort.Slice(during, func(i, j int) bool { return during[i] < during[j] })
	if len(during) == 0 {
		during = []time.Duration{0}
	}
	b.ReportMetric(lockMS, "lock_ms")
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "reader_p50_ms")
	b.ReportMetric(float64(during[len(during)-1].Microseconds())/1000, "reader_max_at_switch_ms")
	b.ReportMetric(float64(all[len(all)-1].Microseconds())/1000, "reader_max_ms")
	b.ReportMetric(float64(n)/took.Seconds(), "switch_rows/s")
	b.ReportMetric(took.Seconds(), "switch_s")
	b.Logf("lock %.1f ms; reader p50 %s, slowest overlapping the lock %s (%d queries), slowest overall %s over %d queries; switch of %d rows in %s",
		lockMS, all[len(all)/2], during[len(during)-1], len(during), all[len(all)-1], len(all), n, took)
}
