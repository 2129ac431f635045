package pace

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// openAIWindow is the window of OpenAI's limits: requests and tokens per
// minute (RPM, TPM). A reset longer than it (a per-day limit) is read as
// its own window.
const openAIWindow = time.Minute

// maxLimit is the largest limit believed: a billion requests or tokens a
// window; past it (or below 1) the header is read as absent.
const maxLimit = 1e9

// maxReset bounds any reset or Retry-After a server sends, so that an absurd
// value cannot overflow a Duration or stop a model for days.
const maxReset = 24 * time.Hour

// Bucket is one rate limit as a server describes it: its size, what is left
// of it, and when it is full again.
type Bucket struct {
	Limit     float64       // requests or tokens the window allows
	Remaining float64       // what is left now
	Reset     time.Duration // until the bucket is full again (OpenAI), or until the window ends
	Window    time.Duration // the window Limit is per, when the headers' kind says it; 0 = not said
}

// Known reports whether the server described the bucket.
func (b Bucket) Known() bool { return b.Limit > 0 }

// Rate is how fast the bucket refills, per second. With a known window that
// the reset fits in, Limit per Window (OpenAI's limits are per minute: a
// remaining count rounded down would make the estimate below noisy while
// the bucket is nearly full). Otherwise what has been used of it
// (Limit − Remaining) comes back within Reset; 0 when that says nothing
// (the bucket is full, or no reset was given).
func (b Bucket) Rate() float64 {
	if !b.Known() {
		return 0
	}
	if b.Window > 0 && b.Reset <= b.Window {
		return b.Limit / b.Window.Seconds()
	}
	used := b.Limit - b.Remaining
	if used <= 0 || b.Reset <= 0 {
		return 0
	}
	return used / b.Reset.Seconds()
}

// State is the rate-limit state one answer carried.
type State struct {
	Requests, Tokens Bucket
	RetryAfter       time.Duration // Retry-After or retry-after-ms; 0 = none
	By               Source        // the headers it was read from
}

// Known reports whether the answer carried any rate-limit header.
func (s State) Known() bool { return s.Requests.Known() || s.Tokens.Known() || s.RetryAfter > 0 }

// ParseHeaders reads the rate-limit state of an answer:
//
//   - OpenAI's x-ratelimit-limit-requests, x-ratelimit-remaining-requests,
//     x-ratelimit-reset-requests and the same three for tokens
//     (https://platform.openai.com/docs/guides/rate-limits, "Rate limits in
//     headers"; resets are Go-style durations such as "1s", "6m0s", "20ms",
//     "1h2m3.5s"). Azure OpenAI sends the same names, and -1 when a limit
//     does not apply, which is read as unknown. Groq, OpenRouter and
//     Together send them too.
//   - The IETF draft's RateLimit-Limit, RateLimit-Remaining and
//     RateLimit-Reset (delta seconds; draft-ietf-httpapi-ratelimit-headers),
//     as gateways in front of vLLM or llama.cpp send them: a requests bucket.
//   - Retry-After (delay-seconds or an HTTP-date, RFC 9110 §10.2.3) and
//     retry-after-ms (OpenAI's SDKs honour it).
//
// Voyage, Cohere and Jina document their per-minute limits and a 429 past
// them, but no rate-limit headers (docs.voyageai.com/docs/rate-limits,
// docs.cohere.com/docs/rate-limits, jina.ai/api-dashboard/rate-limit);
// vLLM and llama.cpp's server have no rate limit of their own. For them
// only a 429 and its Retry-After, when sent, set the pace.
func ParseHeaders(h http.Header, now time.Time) State {
	var s State
	s.Requests = bucket(h, "X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests", parseGoDuration)
	s.Tokens = bucket(h, "X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens", parseGoDuration)
	for _, b := range []*Bucket{&s.Requests, &s.Tokens} {
		if b.Known() {
			b.Window = openAIWindow
		}
	}
	if s.Requests.Known() || s.Tokens.Known() {
		s.By = ByHeaders
	} else if b := bucket(h, "Ratelimit-Limit", "Ratelimit-Remaining", "Ratelimit-Reset", parseSeconds); b.Known() {
		s.Requests, s.By = b, ByDraftHeaders
	}
	s.RetryAfter = RetryAfter(h, now)
	return s
}

// bucket reads one limit's three headers; a limit that is missing, not a
// number, or not positive leaves the bucket unknown.
func bucket(h http.Header, limit, remaining, reset string, parseReset func(string) (time.Duration, bool)) Bucket {
	l, ok := number(h.Get(limit))
	if !ok || l < 1 || l > maxLimit {
		return Bucket{}
	}
	r, ok := number(h.Get(remaining))
	if !ok || r < 0 {
		return Bucket{}
	}
	b := Bucket{Limit: l, Remaining: min(r, l)}
	if b.Remaining < 0 {
		b.Remaining = 0
	}
	if d, ok := parseReset(strings.TrimSpace(h.Get(reset))); ok {
		b.Reset = d
	}
	return b
}

func number(v string) (float64, bool) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// parseGoDuration reads OpenAI's resets: "1s", "6m0s", "20ms", "1h2m3.5s";
// a bare number is seconds.
func parseGoDuration(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return 0, false
		}
		return min(d, maxReset), true
	}
	return parseSeconds(v)
}

// parseSeconds reads a delay in seconds, fractions allowed.
func parseSeconds(v string) (time.Duration, bool) {
	f, ok := number(v)
	if !ok || f < 0 {
		return 0, false
	}
	return time.Duration(min(f, maxReset.Seconds()) * float64(time.Second)), true
}

// RetryAfter reads retry-after-ms, then Retry-After (delay-seconds or an
// HTTP-date). It returns 0 when there is none or it is unusable.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, ok := number(v); ok && ms > 0 {
			return time.Duration(min(ms, float64(maxReset.Milliseconds())) * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, ok := number(v); ok {
		if s <= 0 {
			return 0
		}
		return time.Duration(min(s, maxReset.Seconds()) * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), maxReset)
	}
	return 0
}

// mayLimit reports whether h may hold any header ParseHeaders reads, by the
// canonical keys net/http gives an answer's headers: a cheap test, so that
// an answer without any (llama.cpp, vLLM, a loopback server) is not parsed.
// ParseHeaders reads the limit of each bucket first, and a bucket without
// it is unknown, so these five keys are enough.
func mayLimit(h http.Header) bool {
	for _, k := range [...]string{"X-Ratelimit-Limit-Requests", "X-Ratelimit-Limit-Tokens", "Ratelimit-Limit", "Retry-After", "Retry-After-Ms"} {
		if _, ok := h[k]; ok {
			return true
		}
	}
	return false
}
