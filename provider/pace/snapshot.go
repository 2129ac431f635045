package pace

import (
	"fmt"
	"time"
)

// recovered is how long a model must go without a 429 to count as no longer
// rate-limited.
const recovered = time.Minute

// stats counts what a model's requests met: 429s and answers per second of
// the last minute, and the time requests waited for their turn.
//
// It is not safe for concurrent use: the Governor's lock guards it.
type stats struct {
	since    time.Time
	secs     [60]second // by Unix second modulo 60
	last429  time.Time
	waitedNs int64 // total time requests waited for their turn
	total429 int64
}

type second struct {
	unix            int64
	limits, answers int
}

func (s *stats) slot(now time.Time) *second {
	u := now.Unix()
	sec := &s.secs[u%60]
	if sec.unix != u {
		*sec = second{unix: u}
	}
	return sec
}

func (s *stats) limited(now time.Time) {
	s.slot(now).limits++
	s.last429 = now
	s.total429++
}

func (s *stats) answered(now time.Time) { s.slot(now).answers++ }

// sum adds the counts of the seconds in (now−d, now].
func (s *stats) sum(now time.Time, d time.Duration) (limits, answers int) {
	from := now.Add(-d).Unix()
	for _, sec := range s.secs {
		if sec.unix > from && sec.unix <= now.Unix() {
			limits += sec.limits
			answers += sec.answers
		}
	}
	return limits, answers
}

// answerRate is the rate answers came at over the last five seconds.
func (s *stats) answerRate(now time.Time) float64 {
	_, n := s.sum(now, 5*time.Second)
	return float64(n) / 5
}

// Snapshot is a model's pacing at one moment, for status, metrics and the
// log: its limit of requests in flight, its pace, and the 429s and answers
// it met.
type Snapshot struct {
	Limits
	Pacing
	Seen
}

// Limits is how many requests a model may have in flight and has.
type Limits struct {
	Limit    int // requests allowed in flight now
	Ceiling  int // max_concurrency
	LimitBy  Why // why the limit is where it is
	InFlight int
}

// Pacing is how fast a model's requests start.
type Pacing struct {
	// Rate is the pace of requests per second (0 = not paced) and By what set it.
	Rate float64
	By   Source
	// Allowed is the provider's own rate in requests per second, from its
	// headers; 0 = it did not say.
	Allowed float64
	// TokenRate is the pace of estimated tokens per second; 0 = not paced.
	TokenRate float64
	PausedFor time.Duration // until the pause after a 429 ends; 0 = not paused
}

// Seen is what a model's requests met: 429s, answers, waits.
type Seen struct {
	Limited     int           // 429s (and 503s with Retry-After) in the last minute
	Total429    int64         // since the model was built
	Answered    int           // answers in the last minute
	Waited      time.Duration // total time requests waited for their turn
	RateLimited bool          // a 429 came within the last minute
}

// Snapshot returns the model's pacing now.
func (g *Governor) Snapshot() Snapshot {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	rate, by := g.rate.requestRate()
	tok, tby := g.rate.tokenRate()
	if rate == 0 && tok > 0 {
		by = tby
	}
	s := Snapshot{
		Limits: Limits{Limit: g.conc.allowed(), Ceiling: g.cfg.Ceiling, LimitBy: g.conc.by, InFlight: g.conc.inFlight},
		Pacing: Pacing{Rate: rate, By: by, Allowed: g.rate.reqs, TokenRate: tok},
		Seen: Seen{Total429: g.seen.total429, Waited: time.Duration(g.seen.waitedNs),
			RateLimited: !g.seen.last429.IsZero() && now.Sub(g.seen.last429) < recovered},
	}
	if d := g.rate.pausedUntil.Sub(now); d > 0 {
		s.PausedFor = d
	}
	s.Limited, s.Answered = g.seen.sum(now, time.Minute)
	return s
}

// waited adds d to the time requests waited.
func (s *stats) waited(d time.Duration) {
	if d <= 0 {
		return
	}
	s.waitedNs += int64(d)
}

// Concurrency says the limit in words: "32 of 32, ceiling", "8 of 64,
// server slots", "3 of 64, 429 backoff".
func (s Snapshot) Concurrency() string {
	if s.LimitBy == ByNoReason {
		return fmt.Sprintf("%d of %d", s.Limit, s.Ceiling)
	}
	return fmt.Sprintf("%d of %d, %s", s.Limit, s.Ceiling, s.LimitBy)
}

// Pace says the pace in words: "19.4 of 20 req/s, by x-ratelimit",
// "5 req/s, by requests_per_minute", "not paced".
func (s Snapshot) Pace() string {
	switch {
	case s.Rate > 0 && s.Allowed > 0:
		return fmt.Sprintf("%.3g of %.3g req/s, by %s", s.Rate, s.Allowed, s.By)
	case s.Rate > 0:
		return fmt.Sprintf("%.3g req/s, by %s", s.Rate, s.By)
	case s.TokenRate > 0:
		return fmt.Sprintf("%.4g tokens/s, by %s", s.TokenRate, s.By)
	}
	return "not paced"
}
