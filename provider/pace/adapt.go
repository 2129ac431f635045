package pace

import (
	"time"
)

// Mode says what a model's concurrency limit follows.
type Mode uint8

// The modes of a limit.
const (
	// Hosted is a hosted API (OpenAI, Cohere, Voyage, Jina, …): the limit
	// stays at the ceiling, and only the provider's own word lowers it — a
	// 429, or a 503 with Retry-After. Its latency is no congestion signal:
	// it is dominated by how many tokens the model writes, and a hosted API
	// says plainly when it is overloaded.
	Hosted Mode = iota
	// SelfHosted is a server of the operator's (llama.cpp, vLLM, Ollama):
	// the limit follows the server's own queue signal once the provider
	// gives one (ServerSlots, ServerQueue) and, until then, the latency per
	// output token (see latency).
	SelfHosted
)

// String names the mode as docs and logs do.
func (m Mode) String() string {
	if m == SelfHosted {
		return "self-hosted"
	}
	return "hosted"
}

// Why says why a model's limit is where it is.
type Why string

// The reasons of a limit.
const (
	ByNoReason  Why = ""
	ByCeiling   Why = "ceiling"                    // nothing said overload
	ByFixed     Why = "adaptive_concurrency false" // the operator fixed it
	ByBackoff   Why = "429 backoff"                // cut by 429s (or 503s with Retry-After), growing back
	BySlots     Why = "server slots"               // the server's slot count (llama.cpp /props total_slots)
	ByQueue     Why = "server queue"               // the server's waiting requests (vLLM num_requests_waiting)
	ByLatency   Why = "latency per token"          // requests queued at the server, seen in the latency per output token
	BySlowStart Why = "slow start"                 // growing from its start, nothing said overload yet
)

// Tuning of the concurrency limit.
const (
	// tolerance is how much slower (per output token) than its baseline a
	// window may be before it counts as queueing: Netflix's Gradient2
	// default.
	tolerance = 1.5
	// minQueueing is the least rise of the mean answer time that counts as
	// queueing, whatever the ratio: a server answering in 1 ms that takes 2
	// ms at twice the requests is not overloaded in any sense that matters
	// (this process's own CPU, shared with the server on loopback, is then
	// what queues), and a limit lowered for it would have to grow back when
	// the model's answers get longer.
	minQueueing = 20 * time.Millisecond
	// probeEvery is how many windows pass between two probes at first: a
	// window at half the limit. Latency that falls by a third with half the
	// requests in flight is queueing that the baseline learned; latency that
	// does not is the model's own. A probe that found none is made half as
	// often next time, up to probeMax windows apart.
	probeEvery = 16
	probeMax   = 128
	// minWindow and minSamples bound a window, so that one fast answer is not
	// a verdict.
	minWindow  = 50 * time.Millisecond
	minSamples = 3
	// cutFactor is what a 429 leaves of the limit, at most once a window.
	cutFactor = 0.75
	// slotsHeadroom is the limit over a server's slots: one request waiting
	// per slot, so that a slot that finishes does not wait for the network
	// to hand it the next request (llama-server defers what finds no free
	// slot to its queue: tools/server/README.md, "--parallel").
	slotsHeadroom = 2
)

// concurrency is the limit of a model's requests in flight (see Mode).
// Whatever moves it, it grows back by doubling every window that used it
// fully once nothing says overload: from 1 to a ceiling of 64 in 6 windows.
//
// It is not safe for concurrent use: the Governor's lock guards it.
type concurrency struct {
	limit    float64 // requests allowed in flight, 1..ceiling
	ceiling  float64
	inFlight int
	mode     Mode
	fixed    bool // the limit stays at the ceiling
	by       Why
	win      window
	lastCut  time.Time
	lat      latency
	srv      server
}

// window is the answers of one round trip, as they come.
type window struct {
	start   time.Time // only requests sent after it count
	samples int
	rtt     float64 // the sum of their answer times, in seconds
	tokens  float64 // the sum of their output tokens (1 for an answer that reports none)
	peak    int     // most requests in flight meanwhile
}

// reset starts a new window at now, with inFlight requests out.
func (w *window) reset(now time.Time, inFlight int) { *w = window{start: now, peak: inFlight} }

// server is what a self-hosted server says of its own queue.
type server struct {
	slots   int // its slots (llama.cpp total_slots); 0 = not said
	queue   bool
	waiting int // its requests waiting, at the last look (vLLM num_requests_waiting)
}

func newConcurrency(start, ceiling int, now time.Time, mode Mode, fixed bool) concurrency {
	ceiling = max(ceiling, 1)
	c := concurrency{ceiling: float64(ceiling), mode: mode, fixed: fixed, win: window{start: now}, lat: latency{every: probeEvery}}
	switch {
	case fixed:
		c.limit, c.by = c.ceiling, ByFixed
	case mode == Hosted:
		c.limit, c.by = c.ceiling, ByCeiling
	default:
		c.limit, c.by = float64(min(max(start, 1), ceiling)), BySlowStart
	}
	return c
}

// allowed is the whole number of requests the limit lets in flight.
func (c *concurrency) allowed() int { return max(int(c.limit), 1) }

// take counts a request going out.
func (c *concurrency) take() {
	c.inFlight++
	c.win.peak = max(c.win.peak, c.inFlight)
}

// sample records the answer to a request sent at sent, after rtt, with
// tokens output tokens (0 = not reported), and at a window's end adapts the
// limit. Only requests sent within the window count: those sent before went
// out under another limit.
func (c *concurrency) sample(now, sent time.Time, rtt time.Duration, tokens int) {
	if c.fixed || sent.Before(c.win.start) {
		return
	}
	c.win.samples++
	c.win.rtt += rtt.Seconds()
	c.win.tokens += float64(max(tokens, 1))
	mean := c.win.rtt / float64(c.win.samples)
	if c.win.samples < minSamples || now.Sub(c.win.start) < max(minWindow, time.Duration(mean*float64(time.Second))) {
		return
	}
	if mean > 0 { // a clock that did not move gives no verdict
		c.adapt(mean)
	}
	c.win.reset(now, c.inFlight)
}

// adapt ends a window whose mean answer time was mean seconds.
func (c *concurrency) adapt(mean float64) {
	c.lat.rtt = mean
	full := c.win.peak >= c.allowed() // the window used the whole limit
	switch {
	case c.srv.slots > 0:
		c.grow(full, float64(min(c.srv.slots*slotsHeadroom, int(c.ceiling))), BySlots)
	case c.srv.queue:
		if c.srv.waiting == 0 {
			c.grow(full, c.ceiling, ByQueue)
		}
	case c.mode == Hosted:
		c.grow(full, c.ceiling, ByBackoff)
	default:
		if c.lat.adapt(c, c.win.rtt/c.win.tokens, mean, c.win.peak) {
			before := c.limit
			c.grow(full, c.ceiling, ByLatency)
			c.lat.settle = c.limit > before
		}
	}
}

// grow doubles a limit below top when the window used it fully, and says
// why it is where it is: by, when top is below the ceiling.
func (c *concurrency) grow(full bool, top float64, by Why) {
	if c.limit > top {
		c.limit = top
	}
	if full && c.limit < top {
		c.limit = min(top, 2*c.limit)
	}
	if c.limit >= top {
		c.by = ByCeiling
		if top < c.ceiling {
			c.by = by // the server's own signal holds it below the ceiling
		}
	}
}

// cut lowers the limit after a 429, once a window: the answers of requests
// sent together arrive together and are one signal, not many.
func (c *concurrency) cut(now time.Time) {
	if c.fixed {
		return
	}
	if !c.lastCut.IsZero() && now.Sub(c.lastCut) < max(minWindow, time.Duration(c.lat.rtt*float64(time.Second))) {
		return
	}
	c.lastCut = now
	c.limit = max(1, c.limit*cutFactor)
	c.by = ByBackoff
}

// slots sets the server's slot count: the limit is slotsHeadroom requests
// a slot (within the ceiling), and grows back to it after a 429.
func (c *concurrency) slots(n int) {
	if c.fixed || n <= 0 {
		return
	}
	c.srv.slots = n
	c.limit, c.by = float64(min(n*slotsHeadroom, int(c.ceiling))), BySlots
	if c.limit == c.ceiling {
		c.by = ByCeiling
	}
}

// queued takes the server's waiting requests at one look at now: while
// any wait, the limit comes down to what the server runs of ours (the
// requests in flight less those waiting), at most once a window, as for a
// 429; it grows again, a window at a time, once none wait.
func (c *concurrency) queued(now time.Time, waiting int) {
	if c.fixed || waiting < 0 {
		return
	}
	c.srv.queue, c.srv.waiting = true, waiting
	if waiting == 0 || !c.lastCut.IsZero() && now.Sub(c.lastCut) < max(minWindow, time.Duration(c.lat.rtt*float64(time.Second))) {
		return
	}
	c.lastCut = now
	c.limit = max(1, min(c.limit, float64(c.inFlight-waiting)))
	c.by = ByQueue
}
