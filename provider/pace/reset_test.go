package pace

import (
	"testing"
	"time"
)

// TestLimitedWaitsForTheTokensReset: a 429 whose headers show the tokens
// bucket empty pauses the model until the tokens reset the server names (no
// earlier: every request before it would be refused and retried), whatever
// the hint-less backoff would have been; a Retry-After still wins.
func TestLimitedWaitsForTheTokensReset(t *testing.T) {
	now := time.Unix(1700000000, 0)
	tests := []struct {
		name     string
		header   []string
		min, max time.Duration // the next start, after now
	}{
		{"tokens empty, reset 2s", []string{"x-ratelimit-limit-tokens", "1000", "x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "2s"},
			2 * time.Second, 2*time.Second + burst},
		{"tokens empty, reset 45s", []string{"x-ratelimit-limit-tokens", "90000", "x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "45s"},
			45 * time.Second, 45*time.Second + burst},
		{"tokens empty, reset past the cap", []string{"x-ratelimit-limit-tokens", "90000", "x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "3h"},
			maxPause, maxPause + burst},
		{"retry-after wins over the reset", []string{"retry-after", "7", "x-ratelimit-limit-tokens", "1000", "x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "2s"},
			7 * time.Second, 7*time.Second + burst},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPacer(0, 0)
			st := ParseHeaders(header(tt.header...), now)
			p.learn(now, st)
			p.limited(now, st, 0)
			at := p.reserve(now, 0).Sub(now)
			if at < tt.min || at > tt.max {
				t.Fatalf("next start %s after the 429, want in [%s, %s]", at, tt.min, tt.max)
			}
		})
	}
}

// TestTokensPaceFromHeaders: the tokens bucket's headers set the pace of
// estimated tokens: per minute when the reset fits in it, else what was
// used of the bucket over its reset.
func TestTokensPaceFromHeaders(t *testing.T) {
	now := time.Unix(1700000000, 0)
	tests := []struct {
		name   string
		header []string
		rate   float64 // tokens/s the provider allows
	}{
		{"per minute", []string{"x-ratelimit-limit-tokens", "60000", "x-ratelimit-remaining-tokens", "59000", "x-ratelimit-reset-tokens", "1s"}, 1000},
		{"reset past the minute", []string{"x-ratelimit-limit-tokens", "60000", "x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "2m"}, 500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPacer(0, 0)
			p.learn(now, ParseHeaders(header(tt.header...), now))
			got, by := p.tokenRate()
			if want := tt.rate * margin; got < want*0.999 || got > want*1.001 || by != ByHeaders {
				t.Fatalf("token pace %v by %v, want %v by headers", got, by, want)
			}
		})
	}
}

// TestNoBurstAfterAPause: after a 429 the bucket is empty, so the starts
// that waited for the pause go one pace apart from its end, not in the
// burst a full bucket would allow.
func TestNoBurstAfterAPause(t *testing.T) {
	now := time.Unix(1700000000, 0)
	for _, tt := range []struct {
		name   string
		tokens float64
		header []string
		gap    time.Duration // between the starts after the pause, at least (the pace is 97% of the provider's)
	}{
		{"requests pace", 0, []string{"x-ratelimit-limit-requests", "600", "x-ratelimit-remaining-requests", "599", "x-ratelimit-reset-requests", "100ms"},
			100 * time.Millisecond},
		{"tokens pace", 100, []string{"x-ratelimit-limit-tokens", "60000", "x-ratelimit-remaining-tokens", "59000", "x-ratelimit-reset-tokens", "1s"},
			100 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newPacer(0, 0)
			p.learn(now, ParseHeaders(header(tt.header...), now))
			p.limited(now, ParseHeaders(header("retry-after", "2"), now), 0)
			prev := p.reserve(now, tt.tokens)
			if d := prev.Sub(now); d < 2*time.Second {
				t.Fatalf("first start %s after the 429, inside its Retry-After of 2s", d)
			}
			for i := range 5 {
				at := p.reserve(now, tt.tokens)
				if gap := at.Sub(prev); gap < tt.gap {
					t.Fatalf("start %d %s after the one before, want ≥ %s: a burst after the pause", i+2, gap, tt.gap)
				}
				prev = at
			}
		})
	}
}
