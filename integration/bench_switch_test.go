package integration_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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
	waitFor(b, 20*time.Minute, "100,000 vectors of model a", func() bool {
		return queryInt(b, s.conn, "SELECT count(*) FROM public.vecs WHERE v IS NOT NULL") == n
	})
	reader := s.db.Connect(b)
	stop, done := make(chan struct{}), make(chan []time.Duration)
	go func() {
		var lat []time.Duration
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
			lat = append(lat, time.Since(began))
			time.Sleep(2 * time.Millisecond)
		}
	}()
	began := time.Now()
	x.toB(b)
	waitFor(b, 30*time.Minute, "the switch", func() bool {
		return queryInt(b, s.conn, "SELECT count(*) FROM pgimageai.switch_history WHERE rule = 'vec' AND outcome = 'switched'") == 1
	})
	took := time.Since(began)
	close(stop)
	lat := <-done
	var lockMS float64
	if err := s.conn.QueryRow(context.Background(), "SELECT lock_ms FROM pgimageai.switch_history WHERE rule = 'vec'").Scan(&lockMS); err != nil {
		b.Fatal(err)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(lockMS, "lock_ms")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "reader_p50_ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "reader_max_ms")
	b.ReportMetric(float64(n)/took.Seconds(), "switch_rows/s")
	b.ReportMetric(took.Seconds(), "switch_s")
	b.Logf("lock %.1f ms; reader p50 %s, max %s over %d queries; switch of %d rows in %s", lockMS, lat[len(lat)/2], lat[len(lat)-1], len(lat), n, took)
}
