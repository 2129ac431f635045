package pace

import (
	"math"
	"time"
)

// Tuning of the concurrency limit.
const (
	// tolerance is how much slower than its baseline a window may be before
	// the limit comes down: Netflix's Gradient2 default.
	tolerance = 1.5
	// smoothing is the weight of a window's new limit against the old one.
	smoothing = 0.2
	// baselineDown is how fast the baseline latency follows a faster window.
	// It never follows a slower one, so that queueing cannot become the new
	// normal; a probe window resets it (probeEvery).
	baselineDown = 0.5
	// probeEvery is how many windows pass between two probes: a window at
	// half the limit whose mean latency becomes the baseline. Latency that a
	// lower limit does not lower is the model's own (longer answers, a
	// slower provider), not queueing, and the limit recovers; a probe costs
	// about 1/probeEvery/2 of the throughput.
	probeEvery = 16
	firstProbe = 4   // windows before the first probe
	probeMax   = 128 // the longest interval between probes, in windows
	// minWindow and minSamples bound a window, so that one fast answer is not
	// a verdict.
	minWindow  = 50 * time.Millisecond
	minSamples = 3
	// cutFactor is what a 429 leaves of the limit, at most once a window.
	cutFactor = 0.75
)

// concurrency is the adaptive limit of requests in flight: a gradient
// limiter in the manner of Netflix's concurrency-limits (Gradient2). Each
// window of answers (about one round trip) compares its mean latency with a
// long-term baseline: gradient = clamp(tolerance × baseline / mean, 0.5, 1).
// A gradient of 1 (latency holds) lets the limit grow by √limit when the
// window used the limit fully; below 1 (latency climbs: requests queue at the
// server) it shrinks in proportion. Until latency first climbs or a 429
// comes, the limit doubles each full window (slow start).
//
// It is not safe for concurrent use: the Governor's lock guards it.
type concurrency struct {
	limit    float64 // requests allowed in flight, 1..ceiling
	ceiling  float64
	inFlight int
	win      window

	baseline  float64 // latency without queueing, seconds; 0 = none yet
	slowStart bool
	lastCut   time.Time
	probe     probe
	steady    bool // the last window's latency held (no queueing seen)
	fixed     bool // the limit stays at the ceiling
}

// window is the answers of one round trip, as they come.
type window struct {
	start   time.Time // only requests sent after it count
	samples int
	sum     float64 // of their latencies, in seconds
	peak    int     // most requests in flight meanwhile
}

// reset starts a new window at now, with inFlight requests out.
func (w *window) reset(now time.Time, inFlight int) { *w = window{start: now, peak: inFlight} }

// probe is the state of the periodic baseline probe.
type probe struct {
	windows int     // since the last probe
	every   int     // windows between probes; 0 = probeEvery
	saved   float64 // the limit to return to; 0 = not probing
}

func newConcurrency(start, ceiling int, now time.Time, fixed bool) concurrency {
	ceiling = max(ceiling, 1)
	if fixed {
		start = ceiling
	}
	return concurrency{limit: float64(min(max(start, 1), ceiling)), ceiling: float64(ceiling), win: window{start: now}, slowStart: true,
		probe: probe{windows: probeEvery - firstProbe}, fixed: fixed}
}

// allowed is the whole number of requests the limit lets in flight.
func (c *concurrency) allowed() int { return max(int(c.limit), 1) }

// take counts a request going out.
func (c *concurrency) take() {
	c.inFlight++
	c.win.peak = max(c.win.peak, c.inFlight)
}

// sample records the latency of one answer to a request sent at sent and,
// at a window's end, adapts the limit. Only requests sent within the window
// count: those sent before went out under another limit (and, before a
// probe or after slow start doubled, queued behind it).
func (c *concurrency) sample(now, sent time.Time, rtt time.Duration) {
	if c.fixed || sent.Before(c.win.start) {
		return
	}
	c.win.samples++
	c.win.sum += rtt.Seconds()
	mean := c.win.sum / float64(c.win.samples)
	length := max(minWindow, time.Duration(mean*float64(time.Second)))
	if c.win.samples < minSamples || now.Sub(c.win.start) < length {
		return
	}
	if mean <= 0 { // a clock that did not move: no verdict
		c.win.reset(now, c.inFlight)
		return
	}
	c.adapt(now, mean)
	c.win.reset(now, c.inFlight)
}

// adapt ends a window whose mean latency was mean seconds.
func (c *concurrency) adapt(now time.Time, mean float64) {
	switch {
	case c.probe.saved > 0: // a probe window ends: its latency is the baseline
		// A baseline that held (within a tenth) is probed half as often
		// next time, up to probeMax windows apart; one that moved, again
		// after probeEvery.
		every := probeEvery
		if c.steady && c.baseline > 0 && math.Abs(mean-c.baseline) <= c.baseline/10 {
			every = min(2*max(c.probe.every, probeEvery), probeMax)
		}
		c.baseline, c.limit, c.probe = mean, c.probe.saved, probe{every: every}
		return
	case c.baseline == 0:
		c.baseline = mean
	case mean < c.baseline:
		c.baseline += (mean - c.baseline) * baselineDown
	}
	if c.probe.windows++; c.probe.windows >= max(c.probe.every, probeEvery) && c.limit >= 2 {
		c.probe.saved, c.limit, c.slowStart = c.limit, c.limit/2, false
		return
	}
	gradient := max(0.5, min(1, tolerance*c.baseline/mean))
	c.steady = gradient == 1
	full := c.win.peak >= c.allowed() // the window used the whole limit
	if c.slowStart {
		if gradient < 1 {
			c.slowStart = false
		} else {
			if full {
				c.limit = min(2*c.limit, c.ceiling)
			}
			return
		}
	}
	next := c.limit * gradient
	if full && gradient == 1 {
		next += math.Sqrt(c.limit)
	}
	c.limit = max(1, min(c.ceiling, c.limit*(1-smoothing)+next*smoothing))
}

// cut lowers the limit after a 429, once a window: the answers of requests
// sent together arrive together and are one signal, not many.
func (c *concurrency) cut(now time.Time) {
	if c.fixed {
		return
	}
	c.slowStart = false
	if !c.lastCut.IsZero() && now.Sub(c.lastCut) < max(minWindow, time.Duration(c.baseline*float64(time.Second))) {
		return
	}
	c.lastCut = now
	c.limit = max(1, c.limit*cutFactor)
}
