package pace

import (
	"math"
	"net/http"
	"testing"
	"time"
)

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// The OpenAI rows are the headers of a real chat completion as OpenAI's
// guide documents them (https://platform.openai.com/docs/guides/rate-limits,
// "Rate limits in headers": limit, remaining and reset of requests and of
// tokens; resets such as "1s", "6m0s").
func TestParseHeaders(t *testing.T) {
	var none Bucket
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		h          http.Header
		reqs, toks Bucket
		retry      time.Duration
		by         Source
		reqRate    float64
	}{
		{name: "openai", h: header(
			"x-ratelimit-limit-requests", "60", "x-ratelimit-limit-tokens", "150000",
			"x-ratelimit-remaining-requests", "59", "x-ratelimit-remaining-tokens", "149984",
			"x-ratelimit-reset-requests", "1s", "x-ratelimit-reset-tokens", "6m0s"),
			reqs: Bucket{60, 59, time.Second, time.Minute}, toks: Bucket{150000, 149984, 6 * time.Minute, time.Minute}, by: ByHeaders, reqRate: 1},
		{name: "openai resets in ms and compound", h: header(
			"x-ratelimit-limit-requests", "1200", "x-ratelimit-remaining-requests", "1199", "x-ratelimit-reset-requests", "50ms",
			"x-ratelimit-limit-tokens", "1000", "x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "1h2m3.5s"),
			reqs: Bucket{1200, 1199, 50 * time.Millisecond, time.Minute}, toks: Bucket{1000, 0, time.Hour + 2*time.Minute + 3500*time.Millisecond, time.Minute}, by: ByHeaders, reqRate: 20},
		{name: "azure -1 is no limit", h: header(
			"x-ratelimit-limit-tokens", "-1", "x-ratelimit-remaining-tokens", "-1", "x-ratelimit-reset-tokens", "0"),
			by: ByNone},
		{name: "ietf draft", h: header("RateLimit-Limit", "100", "RateLimit-Remaining", "50", "RateLimit-Reset", "5"),
			reqs: Bucket{100, 50, 5 * time.Second, 0}, by: ByDraftHeaders, reqRate: 10},
		{name: "retry-after seconds", h: header("Retry-After", "2"), retry: 2 * time.Second, reqs: none, toks: none},
		{name: "retry-after-ms first", h: header("Retry-After", "2", "retry-after-ms", "150"), retry: 150 * time.Millisecond, reqs: none, toks: none},
		{name: "retry-after date", h: header("Retry-After", now.Add(3*time.Second).Format(http.TimeFormat)), retry: 3 * time.Second, reqs: none, toks: none},
		{name: "garbage", h: header("x-ratelimit-limit-requests", "many", "x-ratelimit-remaining-requests", "NaN", "Retry-After", "soon"), reqs: none, toks: none},
		{name: "absurd reset capped", h: header("x-ratelimit-limit-requests", "10", "x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "99999h"),
			reqs: Bucket{10, 0, maxReset, time.Minute}, toks: none, by: ByHeaders, reqRate: 10 / maxReset.Seconds()},
		{name: "absurd limit ignored", h: header("x-ratelimit-limit-requests", "1e300", "x-ratelimit-remaining-requests", "0"), by: ByNone},
		{name: "limit below one ignored", h: header("x-ratelimit-limit-requests", "0.0000001", "x-ratelimit-remaining-requests", "0"), by: ByNone},
		{name: "remaining above limit", h: header("x-ratelimit-limit-requests", "10", "x-ratelimit-remaining-requests", "20"),
			reqs: Bucket{10, 10, 0, time.Minute}, toks: none, by: ByHeaders, reqRate: 10.0 / 60},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ParseHeaders(tt.h, now)
			if s.Requests != tt.reqs || s.Tokens != tt.toks || s.RetryAfter != tt.retry || s.By != tt.by {
				t.Fatalf("got %+v, want requests %+v tokens %+v retry %s by %q", s, tt.reqs, tt.toks, tt.retry, tt.by)
			}
			if r := s.Requests.Rate(); math.Abs(r-tt.reqRate) > 1e-9 {
				t.Errorf("request rate %v, want %v", r, tt.reqRate)
			}
		})
	}
}

func FuzzParseHeaders(f *testing.F) {
	f.Add("1200", "1199", "50ms", "5")
	f.Add("-1", "-1", "0", "Wed, 21 Oct 2015 07:28:00 GMT")
	f.Fuzz(func(t *testing.T, limit, remaining, reset, retry string) {
		s := ParseHeaders(header("x-ratelimit-limit-requests", limit, "x-ratelimit-remaining-requests", remaining,
			"x-ratelimit-reset-requests", reset, "Retry-After", retry), time.Now())
		if s.RetryAfter < 0 || s.RetryAfter > maxReset || s.Requests.Reset < 0 || s.Requests.Reset > maxReset {
			t.Fatalf("unbounded state %+v", s)
		}
		if r := s.Requests.Rate(); r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
			t.Fatalf("rate %v", r)
		}
	})
}
