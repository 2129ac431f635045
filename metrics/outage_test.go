package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestOutageSeries: a model down is 0 with when it went down, one up is 1,
// and each rule's parked rows are a gauge; nothing without a reporter.
func TestOutageSeries(t *testing.T) {
	m := New()
	names := []string{"pgimageai_model_up", "pgimageai_model_down_since_timestamp_seconds", "pgimageai_parked_rows"}
	if n, err := testutil.GatherAndCount(m.Registry(), names...); err != nil || n != 0 {
		t.Fatalf("%d series with no reporter (%v), want none", n, err)
	}
	since := time.Unix(1796414400, 0)
	m.SetOutages(func() Outages {
		return Outages{Models: []ModelUp{{Model: "vision", Since: since}, {Model: "other", Up: true}},
			Parked: []Parked{{Rule: "caption", Rows: 42}, {Rule: "alt", Rows: 0}}}
	})
	want := `
# HELP pgimageai_model_down_since_timestamp_seconds When a model that is down went down (Unix seconds); 0 while it is up.
# TYPE pgimageai_model_down_since_timestamp_seconds gauge
pgimageai_model_down_since_timestamp_seconds{model="other"} 0
pgimageai_model_down_since_timestamp_seconds{model="vision"} 1.7964144e+09
# HELP pgimageai_model_up 1 while a model answers, 0 while it is down (every request refused, reset, timed out or a 5xx): its rows park and are sent again by themselves once it answers.
# TYPE pgimageai_model_up gauge
pgimageai_model_up{model="other"} 1
pgimageai_model_up{model="vision"} 0
# HELP pgimageai_parked_rows Rows of a rule parked while its model is down (pgimageai.parked), as last counted (every 5 s).
# TYPE pgimageai_parked_rows gauge
pgimageai_parked_rows{rule="alt"} 0
pgimageai_parked_rows{rule="caption"} 42
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	var none *Metrics
	none.SetOutages(nil)
	if o := none.Outages(); len(o.Models) != 0 {
		t.Error("a nil Metrics reports outages")
	}
}
