package console

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// The rows-per-minute chart: the bridge keeps no history of its pace, so
// the console samples each rule's calls of the day (pgimageai.usage, a few
// rows) and keeps the last hour of per-minute deltas in memory. The chart
// starts when the console does.

const (
	sampleEvery = 10 * time.Second
	chartSpan   = 60 // minutes
)

// sampler holds the per-minute calls of each rule. It is safe for
// concurrent use.
type sampler struct {
	mu      sync.Mutex
	started time.Time
	last    map[string]int64             // the day's calls at the last sample
	minutes map[string]map[int64]float64 // rule → unix minute → calls in it
	seen    map[string]seen              // progress: the first count seen of a job
}

// seen is a job's count when the console first saw it.
type seen struct {
	done int64
	at   time.Time
}

func newSampler() *sampler {
	return &sampler{last: map[string]int64{}, minutes: map[string]map[int64]float64{}, seen: map[string]seen{}}
}

// run samples src every interval until ctx ends.
func (s *sampler) run(ctx context.Context, src Source, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		calls, err := src.CallsToday(ctx)
		if err != nil && ctx.Err() == nil {
			log.Warn("console: sample the rules' calls", "err", err)
		} else if err == nil {
			s.add(time.Now(), calls)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// add records a sample taken at now.
func (s *sampler) add(now time.Time, calls map[string]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	minute := now.Unix() / 60
	if s.started.IsZero() {
		s.started = now
		for r, n := range calls {
			s.last[r] = n
		}
		return
	}
	for r, n := range calls {
		d := n - s.last[r]
		if d < 0 { // a new UTC day began
			d = n
		}
		s.last[r] = n
		m := s.minutes[r]
		if m == nil {
			m = map[int64]float64{}
			s.minutes[r] = m
		}
		m[minute] += float64(d)
		for k := range m {
			if k <= minute-chartSpan {
				delete(m, k)
			}
		}
	}
}

// series returns rule's calls per minute since the sampling started, at
// most the last hour, oldest first; nil before the first sample.
func (s *sampler) series(rule string, now time.Time) []float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started.IsZero() {
		return nil
	}
	minute := now.Unix() / 60
	first := max(s.started.Unix()/60, minute-chartSpan+1)
	out := make([]float64, 0, minute-first+1)
	for k := first; k <= minute; k++ {
		out = append(out, s.minutes[rule][k])
	}
	return out
}

// progress returns the rate, in units per second, of a job that has done
// done at now, measured since the console first saw it; 0 until it moved.
func (s *sampler) progress(job string, done int64, now time.Time) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	first, ok := s.seen[job]
	if !ok || done < first.done {
		if len(s.seen) > 1000 {
			clear(s.seen)
		}
		s.seen[job] = seen{done: done, at: now}
		return 0
	}
	el := now.Sub(first.at).Seconds()
	if el < 1 || done == first.done {
		return 0
	}
	return float64(done-first.done) / el
}
