package pace

import (
	"math"
	"math/rand/v2"
	"time"
)

// Backoff of a model whose 429s carry no hint of when to come back.
const (
	blindFirst = time.Second
	blindMax   = time.Minute
	// blindGrowth is how fast a pace set by hint-less 429s grows back, per
	// second without one (additive increase, in proportion).
	blindGrowth = 0.05
	// blindForget is how long without a 429 before such a pace is dropped.
	blindForget = 2 * time.Minute
)

// pacer spaces the starts of a model's requests: at most one per 1/rate
// seconds, and estimated tokens at most at the token rate, where each rate is
// the lowest of the operator's ceiling and what the provider says; and it
// holds every start while the model is paused after a 429.
//
// It is not safe for concurrent use: the Governor's lock guards it.
type pacer struct {
	rpm, tpm float64 // the operator's ceilings, per second; 0 = none

	reqs, toks  float64 // the provider's refill rates, per second, from headers; 0 = unknown
	reqsBy      Source
	blind       blind // the pace 429s without hints set
	nextReq     time.Time
	nextTok     time.Time
	pausedUntil time.Time
	early       starts // starts before the provider's rates were known, within the last burst
}

// start is one request's start and its estimated tokens.
type start struct {
	at     time.Time
	tokens float64
}

// maxEarly bounds the starts remembered before the rates are known.
const maxEarly = 1024

// minPause is the shortest pause after a 429, whatever the headers say: a
// server whose headers claim an enormous rate gets no storm of requests.
// maxPause is the longest, whatever they say (the cap the retrier always put
// on a server's Retry-After): a provider cannot stop its model for a day.
const (
	minPause = 50 * time.Millisecond
	maxPause = 5 * time.Minute
)

// blind is the pace of a model whose 429s carry no hint: cut to 70% of the
// rate answers came at by each 429, grown back by blindGrowth a second, and
// dropped blindForget after the last 429.
type blind struct {
	rate    float64   // requests/s; 0 = none
	grown   time.Time // when rate last grew
	last    time.Time // the last 429
	backoff time.Duration
}

func newPacer(rpm, tpm int) pacer {
	return pacer{rpm: float64(max(rpm, 0)) / 60, tpm: float64(max(tpm, 0)) / 60}
}

// requestRate is the pace of requests per second and what set it; 0 = none.
func (p *pacer) requestRate() (float64, Source) {
	rate, by := 0.0, ByNone
	lower := func(r float64, s Source) {
		if r > 0 && (rate == 0 || r < rate) {
			rate, by = r, s
		}
	}
	lower(p.rpm, ByRequestsPerMinute)
	lower(p.reqs*margin, p.reqsBy)
	lower(p.blind.rate, By429)
	return rate, by
}

// tokenRate is the pace of estimated tokens per second; 0 = none.
func (p *pacer) tokenRate() (float64, Source) {
	rate, by := p.tpm, ByTokensPerMinute
	if r := p.toks * margin; r > 0 && (rate == 0 || r < rate) {
		rate, by = r, ByHeaders
	}
	if rate == 0 {
		by = ByNone
	}
	return rate, by
}

// reserve gives a request of tokens estimated tokens its start time. Each
// rate is a GCRA (a token bucket kept as a theoretical arrival time): starts
// are spaced 1/rate apart, and a pace taken from the provider's headers may
// run ahead of that by burst — the second OpenAI enforces per-minute limits
// over ("quantized", https://platform.openai.com/docs/guides/rate-limits),
// less a tenth for the network's jitter. The operator's ceilings never
// burst.
func (p *pacer) reserve(now time.Time, tokens float64) time.Time {
	at := now
	if p.pausedUntil.After(at) {
		at = p.pausedUntil
	}
	r, rby := p.requestRate()
	if r > 0 {
		at = later(at, p.nextReq.Add(-burstOf(rby)))
	}
	rt, tby := p.tokenRate()
	pacedTokens := rt > 0 && tokens > 0
	if pacedTokens {
		at = later(at, p.nextTok.Add(-burstOf(tby)))
	}
	if r > 0 {
		p.nextReq = later(p.nextReq, at).Add(seconds(1 / r))
	}
	if pacedTokens {
		p.nextTok = later(p.nextTok, at).Add(seconds(tokens / rt))
	}
	if p.reqs == 0 && p.toks == 0 {
		p.early.push(now, start{at, tokens})
	}
	return at
}

// spent is what the starts before the rates were known took of the burst
// that ends at now: the requests and the tokens.
func (p *pacer) spent(now time.Time) (reqs, tokens float64) {
	p.early.expire(now)
	return float64(p.early.n), p.early.tokens
}

// starts is a ring of the starts of the last burst, oldest first, with the
// sum of their tokens: what every answer asks of it costs O(1) amortised
// (a start leaves it once), where a walk over up to maxEarly starts of a
// server that never sends rate-limit headers cost microseconds an answer.
// Starts come in the order of their times (reserve runs under the
// Governor's lock and gives each a start no earlier than the one before,
// or than now); so do the times expire is called with, to within the
// moment between a clock's reading and the lock.
type starts struct {
	buf    []start // the ring; len = its capacity, up to maxEarly
	head   int     // the oldest
	n      int
	tokens float64
}

// push adds s, first dropping what is older than a burst at now, and the
// oldest when maxEarly are held.
func (r *starts) push(now time.Time, s start) {
	r.expire(now)
	if r.n == len(r.buf) {
		if len(r.buf) == maxEarly {
			r.pop()
		} else {
			r.grow()
		}
	}
	r.buf[(r.head+r.n)%len(r.buf)] = s
	r.n++
	r.tokens += s.tokens
}

// expire drops the starts a burst or more before now.
func (r *starts) expire(now time.Time) {
	for r.n > 0 && now.Sub(r.buf[r.head].at) >= burst {
		r.pop()
	}
}

func (r *starts) pop() {
	r.tokens -= r.buf[r.head].tokens
	r.buf[r.head] = start{}
	r.head = (r.head + 1) % len(r.buf)
	if r.n--; r.n == 0 {
		r.tokens = 0 // no rounding left over
	}
}

// grow doubles the ring's capacity (to maxEarly at most), oldest first.
func (r *starts) grow() {
	buf := make([]start, min(max(2*len(r.buf), 16), maxEarly))
	for i := range r.n {
		buf[i] = r.buf[(r.head+i)%len(r.buf)]
	}
	r.buf, r.head = buf, 0
}

// burst is how far a pace from the provider's headers may run ahead.
const burst = 900 * time.Millisecond

func burstOf(by Source) time.Duration {
	if by == ByHeaders || by == ByDraftHeaders {
		return burst
	}
	return 0
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// learn takes the provider's rates from the state an answer carried. When
// a rate becomes known, what was sent before it counts against its burst:
// the server's bucket holds those requests already.
func (p *pacer) learn(now time.Time, s State) {
	knewReqs, knewToks := p.reqs > 0, p.toks > 0
	if r := s.Requests.Rate(); r > 0 {
		p.reqs, p.reqsBy = r, s.By
	} else if s.Requests.Known() && p.reqs == 0 {
		// A full bucket says nothing of its refill: assume the per-minute
		// window every provider we know documents.
		p.reqs, p.reqsBy = s.Requests.Limit/60, s.By
	}
	if r := s.Tokens.Rate(); r > 0 {
		p.toks = r
	}
	reqs, tokens := p.spent(now)
	if !knewReqs && p.reqs > 0 {
		p.nextReq = later(p.nextReq, now.Add(seconds(reqs/(p.reqs*margin))))
	}
	if !knewToks && p.toks > 0 {
		p.nextTok = later(p.nextTok, now.Add(seconds(tokens/(p.toks*margin))))
	}
	if p.reqs > 0 || p.toks > 0 {
		p.early = starts{}
	}
}

// limited pauses the model after a 429 (or a 503 with Retry-After): for the
// server's Retry-After; else, when the headers show an empty bucket, until
// one request's worth has refilled; else for a growing backoff, with the
// pace cut to 70% of the rate answers came at.
func (p *pacer) limited(now time.Time, s State, answerRate float64) {
	var pause time.Duration
	switch {
	case s.RetryAfter > 0:
		pause = s.RetryAfter
	case s.Requests.Known() && s.Requests.Remaining < 1 && p.reqs > 0:
		pause = seconds(1 / p.reqs)
	case s.Tokens.Known() && s.Tokens.Remaining < 1 && s.Tokens.Reset > 0:
		pause = s.Tokens.Reset
	case p.reqs > 0:
		pause = seconds(1 / p.reqs) // the headers say the bucket is not empty: a burst, quantised
	default:
		pause = p.blind.cut(now, answerRate)
	}
	pause = min(max(pause, minPause), maxPause)
	if until := now.Add(pause); until.After(p.pausedUntil) {
		p.pausedUntil = until
	}
	// The bucket is empty: no burst when the pause ends.
	p.nextReq = later(p.nextReq, p.pausedUntil.Add(burst))
	p.nextTok = later(p.nextTok, p.pausedUntil.Add(burst))
}

// cut lowers the pace after a hint-less 429 and returns how long to pause:
// a backoff that doubles with each 429 in a row (with jitter), up to
// blindMax.
func (b *blind) cut(now time.Time, answerRate float64) time.Duration {
	if b.backoff == 0 {
		b.backoff = blindFirst
	}
	pause := b.backoff/2 + time.Duration(rand.Int64N(int64(b.backoff/2)+1))
	b.backoff = min(2*b.backoff, blindMax)
	rate := answerRate * 0.7
	if b.rate > 0 && (rate <= 0 || b.rate*0.7 < rate) {
		rate = b.rate * 0.7
	}
	if rate <= 0 {
		rate = 1 / pause.Seconds()
	}
	b.rate, b.grown, b.last = max(rate, 1/blindMax.Seconds()), now, now
	return pause
}

// answered lets a pace set by hint-less 429s grow back, and forgets it when
// none has come for blindForget.
func (p *pacer) answered(now time.Time) {
	b := &p.blind
	b.backoff = 0
	if b.rate == 0 {
		return
	}
	if now.Sub(b.last) >= blindForget {
		b.rate = 0
		return
	}
	if dt := now.Sub(b.grown); dt >= time.Second {
		b.rate *= math.Pow(1+blindGrowth, dt.Seconds())
		b.grown = now
	}
}

func seconds(s float64) time.Duration {
	return time.Duration(min(s, maxReset.Seconds()) * float64(time.Second))
}
