package pace

import "math"

// latency is the limit of a self-hosted server that gives no queue signal
// of its own (Ollama, LM Studio, a llama-server without /props): requests
// queue at the server, and latency tells, but only latency per output
// token (a window's answer time over its completion tokens), since a
// model's answers get longer and shorter from prompt to prompt; and only
// latency that our own concurrency made.
//
// The baseline is the latency per token at up to baseN requests in flight.
// A window with no more in flight than that re-learns it, whether latency
// rose or fell: what the same or a lower concurrency meets is the model's
// own (longer answers, a slower model, another client), not queueing that
// this limit caused. Two windows in a row with more in flight than baseN
// that are more than tolerance slower per token (and minQueueing slower
// per answer) are queueing: the limit comes down in proportion (to the
// concurrency the server serves without it), to grow again, doubling,
// from there. A probe, now and then, runs one window at half the limit:
// when latency falls by a third with it, the baseline had learned
// queueing, and the limit stays down. At a limit of 1 no probe is needed:
// every window re-learns the baseline, and the limit doubles from it.
//
// It is not safe for concurrent use: the Governor's lock guards it.
type latency struct {
	base    float64 // seconds per output token at up to baseN in flight; 0 = none yet
	baseRTT float64 // the mean answer time then, seconds
	baseN   int
	rtt     float64 // the last window's mean answer time, seconds (for cut)
	settle  bool    // the limit just rose: the next window's queue is still the old limit's
	suspect bool    // the last window looked like queueing: a second in a row is
	windows int     // since the last probe
	every   int     // windows between probes
	probe   probe
}

// probe is a window at half the limit, under way.
type probe struct {
	saved       float64 // the limit to return to; 0 = not probing
	perTok, rtt float64 // the latency of the window before it
}

// adapt ends a window of perTok seconds per output token and rtt seconds
// an answer, with peak requests in flight at most. It reports whether the
// limit may grow.
func (l *latency) adapt(c *concurrency, perTok, rtt float64, peak int) bool {
	if l.probe.saved > 0 {
		return l.endProbe(c, perTok, rtt, peak)
	}
	queueing := l.base > 0 && peak > l.baseN && perTok > tolerance*l.base && rtt-l.baseRTT >= minQueueing.Seconds()
	if queueing && !l.suspect {
		// One window is not a verdict: a burst of this process's own
		// work (a garbage collection, a neighbour on the CPU) slows
		// every answer of a loopback server for a moment. The limit
		// holds; a second such window in a row is queueing.
		l.suspect, l.settle = true, false
		return false
	}
	l.suspect = false
	if l.settle && !queueing {
		// The first window after the limit rose: its requests met the
		// queue of the lower limit, and say nothing of the new one yet;
		// the limit may go on growing (a slow start overshoots, and the
		// first window at its top says so), but the baseline does not
		// extend to it.
		l.settle = false
		return true
	}
	l.settle = false
	switch {
	case queueing:
		// More in flight and slower per token: requests queue at the
		// server. Back to the concurrency that met the baseline's latency.
		c.limit = max(1, c.limit*l.base/perTok)
		c.by = ByLatency
		l.baseN = min(l.baseN, int(c.limit))
		return false
	case l.base == 0 || peak <= l.baseN:
		// The same or a lower concurrency than the baseline's: whatever
		// its latency, this limit did not make it.
		l.base, l.baseRTT, l.baseN = perTok, rtt, peak
	default: // more in flight, and the latency held
		l.baseN = peak
		if perTok < l.base {
			l.base, l.baseRTT = perTok, rtt
		}
	}
	if l.windows++; l.windows >= l.every && c.limit >= 2 && peak >= c.allowed() {
		l.windows = 0
		l.probe = probe{saved: c.limit, perTok: perTok, rtt: rtt}
		c.limit = math.Floor(c.limit / 2)
		return false
	}
	return true
}

// endProbe ends a probe window (see latency).
func (l *latency) endProbe(c *concurrency, perTok, rtt float64, peak int) bool {
	p := l.probe
	l.probe = probe{}
	if perTok*tolerance < p.perTok && p.rtt-rtt >= minQueueing.Seconds() {
		// Half the requests, a third less latency: the baseline had
		// learned queueing. The limit stays at the probe's.
		l.every = probeEvery
		l.base, l.baseRTT, l.baseN = perTok, rtt, peak
		c.by = ByLatency
		return false
	}
	// The latency is the model's own: the limit it had, and the probe's
	// latency as the baseline (at the probe's concurrency; the next window,
	// at the whole limit, extends it).
	l.every = min(2*l.every, probeMax)
	l.base, l.baseRTT, l.baseN = perTok, rtt, peak
	c.limit, l.settle = p.saved, true
	return false
}
