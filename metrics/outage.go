package metrics

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ModelUp is one model's circuit: up (answering), or down since when (an
// outage: its rows park until it answers again).
type ModelUp struct {
	Model string // models.name
	Up    bool
	Since time.Time // down: since when
}

// Parked is how many rows of a rule wait for their model to answer again.
type Parked struct {
	Rule string
	Rows int64
}

// Outages is the models' circuits and the rules' parked rows at one moment.
type Outages struct {
	Models []ModelUp
	Parked []Parked
}

var (
	modelUp = prometheus.NewDesc(Namespace+"_model_up",
		"1 while a model answers, 0 while it is down (every request refused, reset, timed out or a 5xx): its rows park and are sent again by themselves once it answers.", []string{"model"}, nil)
	modelDownSince = prometheus.NewDesc(Namespace+"_model_down_since_timestamp_seconds",
		"When a model that is down went down (Unix seconds); 0 while it is up.", []string{"model"}, nil)
	parkedRows = prometheus.NewDesc(Namespace+"_parked_rows",
		"Rows of a rule parked while its model is down (pgimageai.parked), as last counted (every 5 s).", []string{"rule"}, nil)
)

// outages holds the function that reports Outages; see SetOutages.
type outages struct {
	f atomic.Pointer[func() Outages]
}

// SetOutages installs the function that reports the models' circuits and
// the parked rows; the last one installed wins. f must be safe for
// concurrent use and fast.
func (m *Metrics) SetOutages(f func() Outages) {
	if m != nil {
		m.outages.f.Store(&f)
	}
}

// Outages returns what the installed function reports, or nothing.
func (m *Metrics) Outages() Outages {
	if m == nil {
		return Outages{}
	}
	if f := m.outages.f.Load(); f != nil {
		return (*f)()
	}
	return Outages{}
}

// outageCollector exports the installed Outages.
type outageCollector struct{ m *Metrics }

func (outageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- modelUp
	ch <- modelDownSince
	ch <- parkedRows
}

func (c outageCollector) Collect(ch chan<- prometheus.Metric) {
	o := c.m.Outages()
	for _, mu := range o.Models {
		ch <- prometheus.MustNewConstMetric(modelUp, prometheus.GaugeValue, b2f(mu.Up), mu.Model)
		since := 0.0
		if !mu.Up {
			since = unixSeconds(mu.Since)
		}
		ch <- prometheus.MustNewConstMetric(modelDownSince, prometheus.GaugeValue, since, mu.Model)
	}
	for _, p := range o.Parked {
		ch <- prometheus.MustNewConstMetric(parkedRows, prometheus.GaugeValue, float64(p.Rows), p.Rule)
	}
}
