package pace

import (
	"math/rand/v2"
	"testing"
	"time"
)

// simulate runs c against a server of slots requests at once, each served in
// service, the rest queued (latency grows with the queue), with noise the
// share of random extra latency; the client keeps the limit full. It returns
// the limit after rounds windows.
func simulate(c *concurrency, slots int, service time.Duration, noise float64, rounds int, rng *rand.Rand) float64 {
	now := time.Unix(0, 0)
	for range rounds {
		l := c.allowed()
		c.inFlight, c.win.peak = l, l
		queued := max(1, float64(l)/float64(slots))
		for range l {
			rtt := time.Duration(float64(service) * queued * (1 + noise*rng.Float64()))
			now = now.Add(rtt / time.Duration(l))
			c.sample(now, now.Add(-rtt), rtt, 0)
		}
	}
	return c.limit
}

func TestConcurrencyFollowsServerSlots(t *testing.T) {
	tests := []struct {
		name           string
		start, ceiling int
		slots          int
		noise          float64
		lo, hi         float64 // where the limit must end
	}{
		{name: "grows to the slots", start: 8, ceiling: 64, slots: 16, lo: 16, hi: 36},
		{name: "comes down from the ceiling", start: 64, ceiling: 64, slots: 8, lo: 8, hi: 20},
		{name: "one slot", start: 8, ceiling: 64, slots: 1, lo: 1, hi: 3},
		{name: "ceiling holds", start: 2, ceiling: 6, slots: 32, lo: 6, hi: 6},
		{name: "noisy latency without queueing does not collapse", start: 8, ceiling: 64, slots: 1000, noise: 1.5, lo: 32, hi: 64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newConcurrency(tt.start, tt.ceiling, time.Unix(0, 0), SelfHosted, false)
			got := simulate(&c, tt.slots, 100*time.Millisecond, tt.noise, 400, rand.New(rand.NewPCG(1, 2)))
			if got < tt.lo || got > tt.hi {
				t.Fatalf("limit %.1f after 400 windows, want %v..%v", got, tt.lo, tt.hi)
			}
		})
	}
}

func TestConcurrencyAppLimitedDoesNotGrow(t *testing.T) {
	c := newConcurrency(4, 64, time.Unix(0, 0), SelfHosted, false)
	now := time.Unix(0, 0)
	for range 200 {
		c.inFlight, c.win.peak = 1, 1 // the caller never has more than one request
		for range 4 {
			now = now.Add(25 * time.Millisecond)
			c.sample(now, now.Add(-100*time.Millisecond), 100*time.Millisecond, 0)
		}
	}
	if c.limit != 4 {
		t.Fatalf("limit %.1f, want 4: a limit that is never used must not grow", c.limit)
	}
}

func TestConcurrencyCutOncePerWindow(t *testing.T) {
	c := newConcurrency(16, 64, time.Unix(0, 0), SelfHosted, false)
	c.lat.rtt = 0.1
	now := time.Unix(10, 0)
	for range 10 { // ten 429s of one burst
		c.cut(now)
	}
	if c.limit != 12 {
		t.Fatalf("limit %.1f after one burst of 429s, want 12 (one cut)", c.limit)
	}
	c.cut(now.Add(200 * time.Millisecond))
	if c.limit != 9 {
		t.Fatalf("limit %.1f after a 429 a window later, want 9", c.limit)
	}
	for range 20 {
		now = now.Add(time.Second)
		c.cut(now)
	}
	if c.limit != 1 {
		t.Fatalf("limit %.2f, want the floor of 1", c.limit)
	}
}

func TestConcurrencyFixed(t *testing.T) {
	c := newConcurrency(2, 24, time.Unix(0, 0), SelfHosted, true)
	got := simulate(&c, 2, 100*time.Millisecond, 0, 100, rand.New(rand.NewPCG(1, 2)))
	c.cut(time.Unix(1000, 0))
	if got != 24 || c.limit != 24 {
		t.Fatalf("limit %.1f, %.1f after a 429: want the ceiling, 24, whatever happens", got, c.limit)
	}
}
