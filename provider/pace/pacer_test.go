package pace

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestEarlyStartsRing: what the ring of early starts says was spent of the
// burst is what a walk over every start says, for starts coming at random
// intervals (bursts, pauses longer than a burst), and it never holds more
// than maxEarly.
func TestEarlyStartsRing(t *testing.T) {
	tests := []struct {
		name string
		gap  time.Duration // the largest gap between two starts
		n    int
	}{
		{name: "a burst of starts", gap: 100 * time.Microsecond, n: 5000},
		{name: "starts a few per burst", gap: 400 * time.Millisecond, n: 500},
		{name: "pauses longer than a burst", gap: 3 * time.Second, n: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			var p pacer
			var all []start
			now := time.Unix(1000, 0)
			for i := range tt.n {
				now = now.Add(time.Duration(rng.Int64N(int64(tt.gap))))
				tokens := float64(rng.IntN(500))
				if got := p.reserve(now, tokens); !got.Equal(now) {
					t.Fatalf("start %d at %s, want now: nothing paces", i, got)
				}
				all = append(all, start{now, tokens})
				var reqs, toks float64
				for _, s := range all[max(0, len(all)-maxEarly):] {
					if now.Sub(s.at) < burst {
						reqs++
						toks += s.tokens
					}
				}
				gotReqs, gotToks := p.spent(now)
				if gotReqs != reqs || gotToks != toks {
					t.Fatalf("after %d starts: spent %v requests, %v tokens; a walk says %v, %v", i+1, gotReqs, gotToks, reqs, toks)
				}
				if p.early.n > maxEarly || len(p.early.buf) > maxEarly {
					t.Fatalf("the ring holds %d of %d, past %d", p.early.n, len(p.early.buf), maxEarly)
				}
			}
		})
	}
}
