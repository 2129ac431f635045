package openai

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/provider"
)

// Sweep runs requests calls of img through p on workers goroutines (the
// bridge's workers of one model: max_concurrency of them) and returns the
// answered calls per second.
func Sweep(tb testing.TB, p *Provider, workers, requests int, img provider.Image) float64 {
	tb.Helper()
	jobs := make(chan struct{}, requests)
	for range requests {
		jobs <- struct{}{}
	}
	close(jobs)
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				if _, err := p.GenerateText(context.Background(), img, "Describe the image"); err != nil {
					tb.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return float64(requests) / time.Since(start).Seconds()
}

// BenchmarkSlotLimited is issue (b) of the rate-limit work: a server that
// serves 24 requests at once in 25 ms each and queues the rest (latency
// grows with the queue). It sweeps fixed concurrencies (max_concurrency n,
// adaptive_concurrency false) and then runs the default (no max_concurrency:
// adaptive under 64), reporting each one's rate and the adaptive one's ratio
// to the best fixed setting of the same run.
func BenchmarkSlotLimited(b *testing.B) {
	const slots, service, requests = 24, 25 * time.Millisecond, 3000
	sem := make(chan struct{}, slots)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		sem <- struct{}{}
		time.Sleep(service)
		<-sem
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, okBody)
	}))
	defer srv.Close()
	img := provider.Image{Data: append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 2048)...), MIME: "image/png"}
	model := func(options string) *Provider {
		p, err := New(provider.Model{Name: "m", Provider: "openai", BaseURL: srv.URL, Model: "m", Options: []byte(options)}, nil)
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
	for range b.N {
		best, bestN := 0.0, 0
		for _, n := range []int{4, 8, 16, 24, 32, 64} {
			p := model(fmt.Sprintf(`{"max_concurrency":%d,"adaptive_concurrency":false}`, n))
			rate := Sweep(b, p, n, requests, img)
			b.Logf("fixed %2d: %6.1f req/s", n, rate)
			if rate > best {
				best, bestN = rate, n
			}
		}
		p := model(`{}`)
		rate := Sweep(b, p, p.cfg.MaxConcurrency, requests, img)
		s := p.Pace().Snapshot()
		b.Logf("adaptive (no max_concurrency): %6.1f req/s, limit %d of %d at the end; best fixed %d: %.1f req/s; ratio %.3f (ideal %d req/s)",
			rate, s.Limit, s.Ceiling, bestN, best, rate/best, int(float64(slots)/service.Seconds()))
		b.ReportMetric(rate/best, "ratio_to_best_fixed")
		b.ReportMetric(float64(s.Limit), "adaptive_limit")
	}
}
