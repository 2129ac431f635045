package console

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/state"
)

func TestSamplerSeries(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 10, 0, 5, 0, time.UTC)
	for _, c := range []struct {
		name    string
		samples []map[string]int64 // one every 20 s from t0
		at      time.Duration      // when the series is read, after t0
		want    []float64
	}{
		{"before any sample", nil, 0, nil},
		{"first sample is the base", []map[string]int64{{"r": 100}}, 0, []float64{0}},
		{"deltas per minute", []map[string]int64{{"r": 100}, {"r": 110}, {"r": 130}, {"r": 131}}, time.Minute, []float64{30, 1}},
		{"a new day starts from zero", []map[string]int64{{"r": 500}, {"r": 4}}, 20 * time.Second, []float64{4}},
		{"an hour at most", hourOf(200), 199 * 20 * time.Second, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSampler()
			for i, m := range c.samples {
				s.add(t0.Add(time.Duration(i)*20*time.Second), m)
			}
			got := s.series("r", t0.Add(c.at))
			if c.name == "an hour at most" {
				if len(got) != chartSpan {
					t.Fatalf("%d minutes, want %d", len(got), chartSpan)
				}
				return
			}
			if len(got) != len(c.want) {
				t.Fatalf("series %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("series %v, want %v", got, c.want)
				}
			}
		})
	}
}

func hourOf(n int) []map[string]int64 {
	out := make([]map[string]int64, n)
	for i := range out {
		out[i] = map[string]int64{"r": int64(i * 3)}
	}
	return out
}

func TestChartAndETA(t *testing.T) {
	c := chartOf([]float64{0, 10, 5})
	want := []bar{{"171.0", "35.0", "2.4", "1.0"}, {"174.0", "2.0", "2.4", "34.0"}, {"177.0", "19.0", "2.4", "17.0"}}
	if c.Max != 10 || c.Last != 5 || len(c.Bars) != 3 || c.Bars[0] != want[0] || c.Bars[1] != want[1] || c.Bars[2] != want[2] {
		t.Fatalf("chart %+v, want bars %v", c, want)
	}
	if !chartOf(nil).Empty {
		t.Fatal("an empty series draws a line")
	}
	total := int64(100)
	for _, e := range []struct {
		done    int64
		total   *int64
		elapsed time.Duration
		want    string
	}{
		{25, &total, time.Minute, "3m0s"},
		{0, &total, time.Minute, ""},
		{25, nil, time.Minute, ""},
		{100, &total, time.Minute, ""},
	} {
		if got := eta(e.done, e.total, e.elapsed); got != e.want {
			t.Errorf("eta(%d, %v, %s) = %q, want %q", e.done, e.total, e.elapsed, got, e.want)
		}
	}
}

// TestOddRuleNames: a rule's name is data too: its link is escaped for the
// path, and the page it leads to is the rule's.
func TestOddRuleNames(t *testing.T) {
	name := `a/b?c d<"x">`
	src := hostileSource(t)
	src.results = func(rule string, _ ResultQuery) (ResultPage, error) {
		if rule != name {
			return ResultPage{}, ErrNoRule
		}
		return ResultPage{Rule: state.RuleListing{Name: name}}, nil
	}
	ov := src.overview
	src.overview = func() Overview {
		o := ov()
		o.Rules = append(o.Rules, RuleView{RuleListing: state.RuleListing{Name: name, Enabled: true}, State: "valid"})
		return o
	}
	ts := newTestServer(t, src, false)
	_, body := do(t, ts, "GET", "/", bearer, nil, nil)
	link := "/rules/" + url.PathEscape(name)
	if !strings.Contains(body, `href="`+strings.ReplaceAll(link, "&", "&amp;")+`"`) && !strings.Contains(body, `href="/rules/a%2Fb%3Fc%20d%3C%22x%22%3E"`) {
		t.Fatalf("no escaped link to the rule in:\n%s", body)
	}
	resp, page := do(t, ts, "GET", "/rules/a%2Fb%3Fc%20d%3C%22x%22%3E", bearer, nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "a/b?c d&lt;&#34;x&#34;&gt;") {
		t.Fatalf("the rule's page: %d\n%s", resp.StatusCode, page)
	}
}
