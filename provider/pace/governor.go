package pace

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// Source says what set a model's pace.
type Source string

// The sources of a pace.
const (
	ByNone              Source = ""
	ByHeaders           Source = "x-ratelimit"         // OpenAI's x-ratelimit-* headers
	ByDraftHeaders      Source = "ratelimit"           // the IETF draft's RateLimit-* headers
	ByRetryAfter        Source = "retry-after"         // a 429 or 503's Retry-After
	By429               Source = "429s"                // 429s without any header: backed off
	ByRequestsPerMinute Source = "requests_per_minute" // the operator's ceiling
	ByTokensPerMinute   Source = "tokens_per_minute"   // the operator's ceiling
)

// Defaults of a Config.
const (
	// DefaultStart is the concurrency a model starts from when nothing says
	// better (llama.cpp's /props does).
	DefaultStart = 8
	// margin is the share of a provider's own rate that the pace uses, so
	// that the jitter of the network does not trip a limit enforced to the
	// request.
	margin = 0.97
)

// Config is what the operator set for a model.
type Config struct {
	Ceiling           int // most requests in flight (max_concurrency); >= 1
	Start             int // the limit to start from; 0 = min(DefaultStart, Ceiling)
	RequestsPerMinute int // ceiling of the pace; 0 = none
	TokensPerMinute   int // ceiling of the estimated tokens per minute; 0 = none
	// Fixed keeps Ceiling requests in flight whatever the latency and the
	// 429s (adaptive_concurrency false); the pace still follows the provider.
	Fixed bool
	// Mode is what the limit follows: Hosted (the ceiling, lowered by 429s
	// only) or SelfHosted (the server's queue, else latency per token).
	Mode Mode
	// Now is the clock; nil = time.Now. Tests set it.
	Now func() time.Time
}

// Governor governs one model's requests (see the package documentation).
// It is safe for concurrent use.
type Governor struct {
	cfg  Config
	now  func() time.Time
	mu   sync.Mutex
	wait queue // requests waiting for a place, first come first served
	conc concurrency
	rate pacer
	seen stats
}

// New returns the governor of a model configured with cfg.
func New(cfg Config) *Governor {
	cfg.Ceiling = max(cfg.Ceiling, 1)
	if cfg.Start <= 0 {
		cfg.Start = DefaultStart
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	t := now()
	return &Governor{
		cfg:  cfg,
		now:  now,
		conc: newConcurrency(cfg.Start, cfg.Ceiling, t, cfg.Mode, cfg.Fixed),
		rate: newPacer(cfg.RequestsPerMinute, cfg.TokensPerMinute),
		seen: stats{since: t},
	}
}

// Ceiling is the most requests the model may have in flight.
func (g *Governor) Ceiling() int { return g.cfg.Ceiling }

// Limit is how many requests the model may have in flight now.
func (g *Governor) Limit() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.conc.allowed()
}

// ServerSlots says that the model's server serves n requests at once (a
// llama-server's total_slots, tools/server/README.md "GET /props"): the
// limit becomes two requests a slot, within the ceiling, and latency no
// longer moves it; a 429 still cuts it, and it grows back to that.
func (g *Governor) ServerSlots(n int) {
	g.mu.Lock()
	g.conc.slots(n)
	g.broadcast()
	g.mu.Unlock()
}

// ServerQueue says how many requests the model's server holds waiting at
// this moment (vLLM's vllm:num_requests_waiting gauge of /metrics,
// https://docs.vllm.ai/en/latest/usage/metrics.html): while any wait, the
// limit is what the server runs of ours; once none do, it grows back by
// doubling a window. Latency no longer moves it.
func (g *Governor) ServerQueue(waiting int) {
	now := g.now()
	g.mu.Lock()
	g.conc.queued(now, waiting)
	g.broadcast()
	g.mu.Unlock()
}

// Ticket is one request let through. Done must be called once its answer
// (or failure) is known; further calls do nothing.
type Ticket struct {
	g      *Governor
	sent   time.Time
	once   sync.Once
	tokens float64
}

// Outcome is what became of a request.
type Outcome struct {
	Header   http.Header // the answer's headers; nil when none came
	Status   int         // the HTTP status; 0 when no answer came
	Limited  bool        // a 429, or a 503 with Retry-After: the server asked to slow down
	TimedOut bool        // no answer within the model's timeout: as slow as it gets
	Tokens   int         // the answer's output (completion) tokens; 0 = not reported
}

// Acquire waits until the model may send a request estimated at tokens
// tokens (0 = not counted): a free place under the concurrency limit, the
// end of a pause, and the request's turn under the pace. When ctx ends first
// it returns ctx's error and holds nothing.
func (g *Governor) Acquire(ctx context.Context, tokens int) (*Ticket, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	began := g.now()
	g.mu.Lock()
	if g.conc.inFlight+g.wait.woken >= g.conc.allowed() || len(g.wait.q) > 0 {
		w := g.wait.add()
		g.mu.Unlock()
		select {
		case <-w:
			g.mu.Lock()
			g.wait.woken--
		case <-ctx.Done():
			g.mu.Lock()
			if !g.wait.remove(w) { // woken meanwhile: the place goes to the next
				g.wait.woken--
				g.wakeLocked()
			}
			g.mu.Unlock()
			return nil, ctx.Err()
		}
	}
	g.conc.take()
	at := g.rate.reserve(g.now(), float64(tokens))
	g.mu.Unlock()

	for {
		wait := at.Sub(g.now())
		if wait > 0 {
			if err := Sleep(ctx, wait); err != nil {
				g.release()
				return nil, err
			}
		}
		g.mu.Lock()
		now := g.now()
		paused := g.rate.pausedUntil.After(now) // a 429 since the turn was given
		if paused {
			// A new turn after the pause, so that the requests that waited
			// for it go spaced rather than all at its end.
			at = g.rate.reserve(now, float64(tokens))
		}
		g.mu.Unlock()
		if !paused {
			break
		}
	}
	now := g.now()
	g.mu.Lock()
	g.seen.waited(now.Sub(began))
	g.mu.Unlock()
	return &Ticket{g: g, sent: now, tokens: float64(tokens)}, nil
}

// release gives back a place that was never used for a request.
func (g *Governor) release() {
	g.mu.Lock()
	g.conc.inFlight--
	g.broadcast()
	g.mu.Unlock()
}

// Done records the outcome of the ticket's request and frees its place.
func (t *Ticket) Done(o Outcome) {
	if t == nil {
		return
	}
	t.once.Do(func() { t.g.done(t, o) })
}

func (g *Governor) done(t *Ticket, o Outcome) {
	now := g.now()
	var st State
	if o.Header != nil && (o.Limited || mayLimit(o.Header)) {
		st = ParseHeaders(o.Header, now)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.conc.inFlight--
	g.rate.learn(now, st)
	switch {
	case o.Limited:
		g.conc.cut(now)
		g.rate.limited(now, st, g.seen.answerRate(now))
		g.seen.limited(now)
	case o.Status >= 200 && o.Status <= 299:
		g.conc.sample(now, t.sent, now.Sub(t.sent), o.Tokens)
		g.rate.answered(now)
		g.seen.answered(now)
	case o.TimedOut:
		g.conc.sample(now, t.sent, now.Sub(t.sent), 0)
	}
	g.broadcast()
}

// broadcast wakes as many waiters as there are free places, first come
// first served; the caller holds g.mu. Waking one per place rather than all
// keeps a queue of many waiters from stampeding the lock at every answer.
func (g *Governor) broadcast() { g.wakeLocked() }

func (g *Governor) wakeLocked() {
	if len(g.wait.q) == 0 {
		return
	}
	for len(g.wait.q) > 0 && g.conc.inFlight+g.wait.woken < g.conc.allowed() {
		close(g.wait.q[0])
		g.wait.q[0] = nil
		g.wait.q = g.wait.q[1:]
		g.wait.woken++
	}
}

// queue is the requests waiting for a place. woken counts those told to go
// that have not taken their place yet, so that one place wakes one waiter.
type queue struct {
	q     []chan struct{}
	woken int
}

func (q *queue) add() chan struct{} {
	w := make(chan struct{})
	q.q = append(q.q, w)
	return w
}

// remove takes w out of the queue; false when it was woken already.
func (q *queue) remove(w chan struct{}) bool {
	for i, x := range q.q {
		if x == w {
			q.q = append(q.q[:i], q.q[i+1:]...)
			return true
		}
	}
	return false
}

// Sleep waits d, or until ctx ends and then returns its error (at once for
// d <= 0 when ctx has ended). provider.SleepContext is this.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
