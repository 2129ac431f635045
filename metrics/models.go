package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgimageai/pgimageai/provider/pace"
)

// Model is the pacing of one model at one moment.
type Model struct {
	Name string // models.name
	pace.Snapshot
}

var (
	modelInFlight = prometheus.NewDesc(Namespace+"_model_requests_in_flight",
		"Requests of a model in flight.", []string{"model"}, nil)
	modelLimit = prometheus.NewDesc(Namespace+"_model_concurrency_limit",
		"The adaptive limit of a model's requests in flight (at most max_concurrency), by why it is there (ceiling, server slots, server queue, latency per token, 429 backoff, slow start, adaptive_concurrency false).", []string{"model", "by"}, nil)
	modelPace = prometheus.NewDesc(Namespace+"_model_pace_requests_per_second",
		"The pace of a model's requests (0 = not paced), by what set it (x-ratelimit, ratelimit, retry-after, 429s, requests_per_minute).", []string{"model", "by"}, nil)
	modelAllowed = prometheus.NewDesc(Namespace+"_model_allowed_requests_per_second",
		"The rate a model's provider allows, from its rate-limit headers (0 = not said).", []string{"model"}, nil)
	modelRateLimited = prometheus.NewDesc(Namespace+"_model_rate_limited",
		"1 while a model met a 429 (or a 503 with Retry-After) within the last minute.", []string{"model"}, nil)
	model429s = prometheus.NewDesc(Namespace+"_model_rate_limited_responses_total",
		"Answers of a model that asked to slow down (429, or 503 with Retry-After); each was sent again without failing a row.", []string{"model"}, nil)
	modelWaited = prometheus.NewDesc(Namespace+"_model_wait_seconds_total",
		"Time a model's requests waited for their turn (concurrency, pace, pauses after 429s).", []string{"model"}, nil)
)

// modelCollector exports the models of the installed Status. A model the
// rules no longer call is no longer in it, so its series go with it.
type modelCollector struct{ m *Metrics }

func (modelCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{modelInFlight, modelLimit, modelPace, modelAllowed, modelRateLimited, model429s, modelWaited} {
		ch <- d
	}
}

func (c modelCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.m.Status().Models {
		gauge := func(d *prometheus.Desc, v float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{m.Name}, labels...)...)
		}
		gauge(modelInFlight, float64(m.InFlight))
		gauge(modelLimit, float64(m.Limit), string(m.LimitBy))
		gauge(modelPace, m.Rate, string(m.By))
		gauge(modelAllowed, m.Allowed)
		gauge(modelRateLimited, b2f(m.RateLimited))
		ch <- prometheus.MustNewConstMetric(model429s, prometheus.CounterValue, float64(m.Total429), m.Name)
		ch <- prometheus.MustNewConstMetric(modelWaited, prometheus.CounterValue, m.Waited.Seconds(), m.Name)
	}
}
