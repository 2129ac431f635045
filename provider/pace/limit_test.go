package pace

import (
	"math"
	"testing"
	"time"
)

// phase is a stretch of simulated time in which the model answers so.
type phase struct {
	d      time.Duration
	answer func(int) (time.Duration, int)
	mean   time.Duration // the mean service time, for the ideal rate
}

// TestLimitHoldsWhenAnswersGetLonger: a model's own latency — longer
// answers, a slower hour — never lowers the limit, whether the model is
// hosted (the ceiling, moved by 429s only) or self-hosted without a queue
// signal (latency per output token, whose baseline is re-learned at the
// same concurrency): a backlog answered in 1 ms, then 200 ms answers; then
// 2 s answers of 1,000 tokens; and answers alternating per row between
// 100 ms and 3 s. The limit is at the ceiling at the end of every window
// of the last phase but the self-hosted probes (a window at half the
// limit now and then), and the answered rate is ≥ 0.95 of the ideal.
func TestLimitHoldsWhenAnswersGetLonger(t *testing.T) {
	const ceiling = 32
	fast := phase{d: 3 * time.Second, answer: constant(time.Millisecond, 5), mean: time.Millisecond}
	slow := phase{d: 20 * time.Second, answer: constant(200*time.Millisecond, 5), mean: 200 * time.Millisecond}
	long := phase{d: 60 * time.Second, answer: constant(2*time.Second, 1000), mean: 2 * time.Second}
	alternating := func(tokens func(time.Duration) int) phase {
		return phase{d: 90 * time.Second, mean: 1550 * time.Millisecond, answer: func(i int) (time.Duration, int) {
			d := 100 * time.Millisecond
			if i%2 == 1 {
				d = 3 * time.Second
			}
			return d, tokens(d)
		}}
	}
	tokensOf := func(d time.Duration) int { return int(d / (3 * time.Millisecond)) } // answers of different lengths
	sameTokens := func(time.Duration) int { return 40 }
	tests := []struct {
		name   string
		phases []phase
	}{
		{name: "1 ms, then 200 ms", phases: []phase{fast, slow}},
		{name: "1 ms, 200 ms, then 2 s of 1,000 tokens", phases: []phase{fast, slow, long}},
		{name: "alternating 100 ms and 3 s answers", phases: []phase{fast, alternating(tokensOf)}},
		{name: "alternating 100 ms and 3 s, the same tokens", phases: []phase{fast, alternating(sameTokens)}},
	}
	for _, mode := range []Mode{Hosted, SelfHosted} {
		for _, tt := range tests {
			t.Run(mode.String()+"/"+tt.name, func(t *testing.T) {
				c := newConcurrency(DefaultStart, ceiling, time.Unix(0, 0), mode, false)
				s := newSim(&c, 0, nil)
				for _, p := range tt.phases {
					s.answer = p.answer
					from, done := s.now, s.done
					s.run(p.d)
					ideal := ceiling / p.mean.Seconds() * p.d.Seconds()
					if p.mean < 100*time.Millisecond {
						continue // a backlog: bound by this process's CPU in life, not by the limit
					}
					for _, w := range s.since(from.Add(2 * p.mean)) {
						if w.allowed != ceiling && !w.probing {
							t.Fatalf("limit %d of %d at %s (phase of %s from %s), by %s", w.allowed, ceiling, w.at.Sub(time.Unix(0, 0)), p.mean, from.Sub(time.Unix(0, 0)), c.by)
						}
					}
					if got := float64(s.done-done) / ideal; got < 0.95 {
						t.Fatalf("phase of %s: %d answers, %.3f of the ideal %.0f", p.mean, s.done-done, got, ideal)
					}
				}
				if c.by != ByCeiling {
					t.Errorf("limit by %q at the end, want %q", c.by, ByCeiling)
				}
			})
		}
	}
}

// TestLimitRecoversFromOne: from a limit of 1 — after 429s (hosted), after
// a server that queued everything behind one slot (self-hosted) — the
// limit is back at the ceiling within 10 windows once nothing says
// overload. The self-hosted limit learns its baseline at 1 too: a window
// at 1 in flight cannot queue behind this limit.
func TestLimitRecoversFromOne(t *testing.T) {
	const ceiling = 64
	tests := []struct {
		name string
		mode Mode
		down func(c *concurrency, s *sim)
	}{
		{name: "hosted, after 429s", mode: Hosted, down: func(c *concurrency, s *sim) {
			s.run(2 * time.Second)
			for i := range 40 {
				c.cut(s.now.Add(time.Duration(i) * time.Second))
			}
			s.now = s.now.Add(40 * time.Second)
		}},
		{name: "self-hosted, after a server of one slot", mode: SelfHosted, down: func(c *concurrency, s *sim) {
			s.slots = 1
			s.answer = constant(100*time.Millisecond, 20)
			for end := s.now.Add(time.Hour); c.allowed() > 1 && s.now.Before(end); {
				s.run(100 * time.Millisecond)
			}
			s.slots = 0 // the queue it held is served at once
		}},
		{name: "self-hosted, after 429s", mode: SelfHosted, down: func(c *concurrency, s *sim) {
			s.run(2 * time.Second)
			for i := range 40 {
				c.cut(s.now.Add(time.Duration(i) * time.Second))
			}
			s.now = s.now.Add(40 * time.Second)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newConcurrency(DefaultStart, ceiling, time.Unix(0, 0), tt.mode, false)
			s := newSim(&c, 0, constant(200*time.Millisecond, 20))
			tt.down(&c, s)
			if c.allowed() > 2 {
				t.Fatalf("limit %d after the overload, want 1 or 2 for the test to mean something", c.allowed())
			}
			c.win.reset(s.now, c.inFlight)
			n := len(s.windows)
			s.answer = constant(200*time.Millisecond, 20)
			s.run(30 * time.Second)
			for i, w := range s.windows[n:] {
				t.Logf("window %d: %d", i+1, w.allowed)
				if w.allowed == ceiling {
					t.Logf("at the ceiling after %d windows", i+1)
					return
				}
				if i+1 >= 10 {
					break
				}
			}
			t.Fatalf("limit %d of %d after 10 windows (by %s)", c.allowed(), ceiling, c.by)
		})
	}
}

// TestLimitFollowsServerSlots: a llama.cpp server says how many requests
// it serves at once (GET /props total_slots): the limit is two a slot,
// whatever the latency, cut by a 429 and grown back to it; never above the
// ceiling.
func TestLimitFollowsServerSlots(t *testing.T) {
	tests := []struct {
		name           string
		slots, ceiling int
		want           int
		by             Why
	}{
		{name: "fewer slots than max_concurrency", slots: 4, ceiling: 64, want: 8, by: BySlots},
		{name: "more slots than max_concurrency", slots: 48, ceiling: 64, want: 64, by: ByCeiling},
		{name: "one slot", slots: 1, ceiling: 8, want: 2, by: BySlots},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newConcurrency(DefaultStart, tt.ceiling, time.Unix(0, 0), SelfHosted, false)
			c.slots(tt.slots)
			s := newSim(&c, tt.slots, constant(50*time.Millisecond, 10))
			s.run(30 * time.Second)
			if c.allowed() != tt.want || c.by != tt.by {
				t.Fatalf("limit %d by %q, want %d by %q", c.allowed(), c.by, tt.want, tt.by)
			}
			c.cut(s.now)
			if c.by != ByBackoff || c.allowed() >= tt.want && tt.want > 1 {
				t.Fatalf("after a 429: limit %d by %q, want below %d by %q", c.allowed(), c.by, tt.want, ByBackoff)
			}
			s.run(5 * time.Second)
			if c.allowed() != tt.want || c.by != tt.by {
				t.Fatalf("5 s after the 429: limit %d by %q, want %d by %q again", c.allowed(), c.by, tt.want, tt.by)
			}
		})
	}
}

// TestLimitFollowsServerQueue: vLLM's num_requests_waiting: while the
// server holds requests waiting, the limit is what it runs of ours; once
// none wait, it doubles a window back to the ceiling.
func TestLimitFollowsServerQueue(t *testing.T) {
	c := newConcurrency(DefaultStart, 64, time.Unix(0, 0), SelfHosted, false)
	s := newSim(&c, 0, constant(100*time.Millisecond, 10))
	s.run(3 * time.Second)
	if c.allowed() != 64 {
		t.Fatalf("limit %d before any queue, want the ceiling", c.allowed())
	}
	c.queued(s.now, 24) // 64 in flight, 24 of them waiting at the server
	if c.allowed() != 40 || c.by != ByQueue {
		t.Fatalf("limit %d by %q with 24 waiting, want 40 by %q", c.allowed(), c.by, ByQueue)
	}
	c.queued(s.now.Add(time.Millisecond), 24) // the next look, within the window: one cut a window
	if c.allowed() != 40 {
		t.Fatalf("limit %d after a second look within the window, want 40", c.allowed())
	}
	s.run(2 * time.Second)
	if c.allowed() != 40 {
		t.Fatalf("limit %d 2 s on, want 40 held: no growth while requests wait", c.allowed())
	}
	c.queued(s.now, 0)
	s.run(2 * time.Second)
	if c.allowed() != 64 || c.by != ByCeiling {
		t.Fatalf("limit %d by %q once none wait, want 64 by %q", c.allowed(), c.by, ByCeiling)
	}
}

// TestLimitComesDownToQueueingServer: self-hosted without a queue signal,
// a server of 8 slots that queues the rest (latency grows with the queue):
// the limit ends near the slots (within three times), not at the ceiling, and the server is
// kept busy.
func TestLimitComesDownToQueueingServer(t *testing.T) {
	for _, start := range []int{8, 64} {
		c := newConcurrency(start, 64, time.Unix(0, 0), SelfHosted, false)
		s := newSim(&c, 8, constant(100*time.Millisecond, 30))
		s.run(10 * time.Minute)
		done := s.done
		s.run(time.Minute)
		got, rate := c.allowed(), float64(s.done-done)/60
		if got < 8 || got > 24 || rate < 0.95*80 || math.IsNaN(rate) {
			t.Fatalf("start %d: limit %d (by %s), %.1f answers/s; want 8..24 and ≥ 0.95 of 80/s", start, got, c.by, rate)
		}
	}
}
