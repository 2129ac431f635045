package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pgimageai/pgimageai/provider/pace"
)

func TestModelSeries(t *testing.T) {
	m := New()
	models := []Model{{Name: "vision", Snapshot: pace.Snapshot{
		Limits: pace.Limits{Limit: 6, Ceiling: 64, LimitBy: pace.ByBackoff, InFlight: 5},
		Pacing: pace.Pacing{Rate: 19.4, By: pace.ByHeaders, Allowed: 20},
		Seen:   pace.Seen{RateLimited: true, Total429: 7, Waited: 90 * time.Second}}}}
	m.SetStatus(func() Status { return Status{Models: models} })
	want := `
# HELP pgimageai_model_concurrency_limit The adaptive limit of a model's requests in flight (at most max_concurrency), by why it is there (ceiling, server slots, server queue, latency per token, 429 backoff, slow start, adaptive_concurrency false).
# TYPE pgimageai_model_concurrency_limit gauge
pgimageai_model_concurrency_limit{by="429 backoff",model="vision"} 6
# HELP pgimageai_model_pace_requests_per_second The pace of a model's requests (0 = not paced), by what set it (x-ratelimit, ratelimit, retry-after, 429s, requests_per_minute).
# TYPE pgimageai_model_pace_requests_per_second gauge
pgimageai_model_pace_requests_per_second{by="x-ratelimit",model="vision"} 19.4
# HELP pgimageai_model_rate_limited_responses_total Answers of a model that asked to slow down (429, or 503 with Retry-After); each was sent again without failing a row.
# TYPE pgimageai_model_rate_limited_responses_total counter
pgimageai_model_rate_limited_responses_total{model="vision"} 7
# HELP pgimageai_model_wait_seconds_total Time a model's requests waited for their turn (concurrency, pace, pauses after 429s).
# TYPE pgimageai_model_wait_seconds_total counter
pgimageai_model_wait_seconds_total{model="vision"} 90
`
	names := []string{"pgimageai_model_concurrency_limit", "pgimageai_model_pace_requests_per_second",
		"pgimageai_model_rate_limited_responses_total", "pgimageai_model_wait_seconds_total"}
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	// A model the rules no longer call leaves no series behind.
	models = nil
	if n, err := testutil.GatherAndCount(m.Registry(), names...); err != nil || n != 0 {
		t.Fatalf("%d series of a model no longer called (%v), want none", n, err)
	}
}

func TestForgetRuleAndModel(t *testing.T) {
	m := New()
	m.Call("gone", "vision", "ok", time.Second)
	m.Call("kept", "vision", "ok", time.Second)
	m.CacheHit("gone")
	m.Retry("old-model")
	m.Budget("old-model", "calls", 1, 10)
	m.ForgetRule("gone")
	m.ForgetModel("old-model")
	if n := testutil.CollectAndCount(m.calls); n != 1 {
		t.Errorf("%d call series, want only the kept rule's", n)
	}
	if n := testutil.CollectAndCount(m.latency); n != 1 {
		t.Errorf("%d latency series, want 1", n)
	}
	for name, c := range map[string]prometheus.Collector{"cache hits": m.cacheHits, "retries": m.retries, "budget used": m.budgetUsed} {
		if n := testutil.CollectAndCount(c); n != 0 {
			t.Errorf("%d %s series of a forgotten rule or model, want none", n, name)
		}
	}
	// Calls that were in flight end after the rule and model went: they
	// must not bring the series back.
	m.Call("gone", "vision", "ok", time.Second)
	m.Call("kept", "old-model", "ok", time.Second)
	m.CacheHit("gone")
	m.Retry("old-model")
	m.Budget("old-model", "calls", 2, 10)
	m.ErrorsDropped("gone", "empty_image", 1)
	for name, c := range map[string]prometheus.Collector{"calls": m.calls, "cache hits": m.cacheHits, "retries": m.retries,
		"budget used": m.budgetUsed, "dropped": m.dropped} {
		want := 0
		if name == "calls" {
			want = 1 // kept on vision
		}
		if n := testutil.CollectAndCount(c); n != want {
			t.Errorf("%d %s series after late calls of a forgotten rule or model, want %d", n, name, want)
		}
	}
	// A rule of that name runs again: recorded again.
	m.Known("gone", "old-model")
	m.Call("gone", "old-model", "ok", time.Second)
	if n := testutil.CollectAndCount(m.calls); n != 2 {
		t.Errorf("%d call series after the rule came back, want 2", n)
	}
}
