package httpjson

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxRetryAfterHeader bounds what ParseRetryAfter believes, before the
// Retrier's own cap, so that absurd values cannot overflow a Duration.
const maxRetryAfterHeader = 24 * time.Hour

// ParseRetryAfter reads Retry-After (delay-seconds or an HTTP-date, RFC 9110
// §10.2.3) and the retry-after-ms header some servers send. It returns 0 when
// there is none or it is unusable.
func ParseRetryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 { // NaN fails ms > 0
			return time.Duration(min(ms, float64(maxRetryAfterHeader.Milliseconds())) * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if !(s > 0) { // NaN included
			return 0
		}
		return time.Duration(min(s, maxRetryAfterHeader.Seconds()) * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), maxRetryAfterHeader)
	}
	return 0
}
