package pace

import (
	"context"
	"net/http"
	"testing"
)

// BenchmarkGovernor is what the governor costs a call: Acquire and Done of
// one request, in a model's steady state, answered without rate-limit
// headers (llama.cpp, vLLM, a loopback server: the pacer keeps the starts of
// the last burst, for the day the provider says its rates) and with
// OpenAI's six (of limits too large to pace this loop).
func BenchmarkGovernor(b *testing.B) {
	openAI := http.Header{}
	for k, v := range map[string]string{"x-ratelimit-limit-requests": "1000000000", "x-ratelimit-remaining-requests": "999999999",
		"x-ratelimit-reset-requests": "6ms", "x-ratelimit-limit-tokens": "1000000000", "x-ratelimit-remaining-tokens": "999999000",
		"x-ratelimit-reset-tokens": "2ms", "content-type": "application/json"} {
		openAI.Set(k, v)
	}
	plain := http.Header{"Content-Type": {"application/json"}, "Date": {"Fri, 04 Dec 2026 10:00:00 GMT"}}
	for _, tc := range []struct {
		name   string
		header http.Header
	}{{"no rate-limit headers", plain}, {"x-ratelimit", openAI}} {
		b.Run(tc.name, func(b *testing.B) {
			g := New(Config{Ceiling: 64})
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				t, err := g.Acquire(ctx, 0)
				if err != nil {
					b.Fatal(err)
				}
				t.Done(Outcome{Status: 200, Header: tc.header, Tokens: 40})
			}
		})
	}
}
