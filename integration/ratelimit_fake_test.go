package integration_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	_ "image/png"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"
)

// openAILimits enforces requests and tokens per minute on a fakeAI the way
// OpenAI documents it (https://platform.openai.com/docs/guides/rate-limits):
// each limit is a bucket of its per-minute size that refills continuously,
// and every answer carries x-ratelimit-limit-, -remaining- and
// -reset-requests and the same three for tokens (reset: until the bucket is
// full again, as "1s", "6m0s", "20ms"). Past a limit the answer is 429 with
// code rate_limit_exceeded. The guide adds that limits may be enforced over
// shorter periods ("quantized"): burst is the seconds of the per-minute rate
// that one moment may use (1 = 1,200 RPM allows 20 requests at once).
//
// A request's tokens are counted as OpenAI counts them before the answer:
// its image by the tile rule of gpt-4o (85 + 170 a 512-px tile,
// https://platform.openai.com/docs/guides/images-vision), its text at four
// characters a token, and max_tokens.
type openAILimits struct {
	rpm, tpm   float64 // 0 = no such limit
	burst      float64 // seconds; 0 = 1
	retryAfter bool    // 429s carry Retry-After (whole seconds, as HTTP has it)

	mu                     sync.Mutex
	reqs, toks             bucket // the per-minute buckets
	burstReqs, burstToks   bucket // the quantised ones
	answered, limited      int
	tokensAnswered         float64
	firstAsked, lastAnswer time.Time
}

type bucket struct {
	size, level, rate float64 // rate per second
	at                time.Time
}

func newBucket(size, perSecond float64, now time.Time) bucket {
	return bucket{size: size, level: size, rate: perSecond, at: now}
}

func (b *bucket) refill(now time.Time) {
	if b.size == 0 {
		return
	}
	b.level = math.Min(b.size, b.level+now.Sub(b.at).Seconds()*b.rate)
	b.at = now
}

func (b *bucket) has(n float64) bool { return b.size == 0 || b.level >= n }

func (b *bucket) take(n float64) {
	if b.size != 0 {
		b.level -= n
	}
}

// full is the time until the bucket is full again, as OpenAI writes it.
func (b *bucket) full() string {
	if b.level >= b.size {
		return "0s"
	}
	return time.Duration((b.size - b.level) / b.rate * float64(time.Second)).Round(time.Millisecond).String()
}

// install makes ai enforce the limits.
func (l *openAILimits) install(ai *fakeAI) {
	now := time.Now()
	burst := l.burst
	if burst == 0 {
		burst = 1
	}
	l.reqs = newBucket(l.rpm, l.rpm/60, now)
	l.toks = newBucket(l.tpm, l.tpm/60, now)
	if l.rpm > 0 {
		l.burstReqs = newBucket(math.Max(1, l.rpm/60*burst), l.rpm/60, now)
	}
	if l.tpm > 0 {
		l.burstToks = newBucket(math.Max(1, l.tpm/60*burst), l.tpm/60, now)
	}
	ai.mu.Lock()
	ai.hook = l.hook
	ai.mu.Unlock()
}

func (l *openAILimits) hook(w http.ResponseWriter, _ *http.Request, req aiRequest) bool {
	cost := requestTokens(req)
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.firstAsked.IsZero() {
		l.firstAsked = now
	}
	for _, b := range []*bucket{&l.reqs, &l.toks, &l.burstReqs, &l.burstToks} {
		b.refill(now)
	}
	okReqs := l.reqs.has(1) && l.burstReqs.has(1)
	okToks := l.toks.has(cost) && l.burstToks.has(cost)
	if okReqs && okToks {
		l.reqs.take(1)
		l.burstReqs.take(1)
		l.toks.take(cost)
		l.burstToks.take(cost)
	}
	h := w.Header()
	if l.rpm > 0 {
		h.Set("x-ratelimit-limit-requests", fmt.Sprint(int(l.rpm)))
		h.Set("x-ratelimit-remaining-requests", fmt.Sprint(int(math.Max(0, l.reqs.level))))
		h.Set("x-ratelimit-reset-requests", l.reqs.full())
	}
	if l.tpm > 0 {
		h.Set("x-ratelimit-limit-tokens", fmt.Sprint(int(l.tpm)))
		h.Set("x-ratelimit-remaining-tokens", fmt.Sprint(int(math.Max(0, l.toks.level))))
		h.Set("x-ratelimit-reset-tokens", l.toks.full())
	}
	if okReqs && okToks {
		l.answered++
		l.tokensAnswered += cost
		l.lastAnswer = now
		return false // fakeAI answers, with these headers
	}
	l.limited++
	kind, wait := "requests", 1/l.burstReqs.rate
	if !okToks {
		kind, wait = "tokens", cost/l.burstToks.rate
	}
	if l.retryAfter {
		h.Set("Retry-After", fmt.Sprint(int(math.Ceil(wait))))
	}
	h.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	fmt.Fprintf(w, `{"error":{"message":"Rate limit reached for gpt-4o on %s per min. Please try again in %s.","type":"%s","param":null,"code":"rate_limit_exceeded"}}`,
		kind, time.Duration(wait*float64(time.Second)).Round(time.Millisecond), kind)
	return true
}

// counts returns the answered and 429 requests, and the rate answers came
// at against the rate the limits allowed over the same time (what the
// buckets held at the start plus what refilled).
func (l *openAILimits) counts() (answered, limited int, rate, allowed float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.lastAnswer.Sub(l.firstAsked).Seconds()
	if d <= 0 {
		return l.answered, l.limited, 0, 0
	}
	allowed = math.Inf(1)
	if l.rpm > 0 {
		allowed = math.Min(allowed, (l.burstReqs.size+l.rpm/60*d)/d)
	}
	if l.tpm > 0 && l.answered > 0 { // in requests of the answered ones' mean cost
		allowed = math.Min(allowed, (l.burstToks.size+l.tpm/60*d)/(l.tokensAnswered/float64(l.answered))/d)
	}
	return l.answered, l.limited, float64(l.answered) / d, allowed
}

// requestTokens counts a chat request as OpenAI counts it against its
// tokens-per-minute limit (see openAILimits).
func requestTokens(req aiRequest) float64 {
	n := float64(len(req.Prompt)) / 4
	if mt, ok := req.Body["max_tokens"].(float64); ok {
		n += mt
	}
	if i := strings.Index(req.DataURL, ";base64,"); i >= 0 {
		if raw, err := base64.StdEncoding.DecodeString(req.DataURL[i+len(";base64,"):]); err == nil {
			if c, _, err := image.DecodeConfig(bytes.NewReader(raw)); err == nil {
				tiles := math.Ceil(float64(c.Width)/512) * math.Ceil(float64(c.Height)/512)
				n += 85 + 170*tiles
			}
		}
	}
	return math.Floor(n)
}
