package console

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/state"
)

// The values the templates render. Every string in them is rendered as
// text: html/template escapes it for where it lands, and nothing here is
// template.HTML.

// Base is what every page has.
type Base struct {
	Title      string
	Nav        string // the current section: overview, rules, errors
	CSRF       string // the form token of the viewer; "" when not logged in
	LoggedIn   bool   // by the session cookie (a logout button makes sense)
	AllowRetry bool
	Refresh    int // seconds between polls of the page; 0 = none
}

func (s *Server) base(who ident, title string) Base {
	b := Base{Title: title, AllowRetry: s.cfg.AllowRetry}
	if who != "" {
		b.CSRF = s.csrfToken(who)
		b.LoggedIn = strings.HasPrefix(string(who), "session:")
	}
	return b
}

type overviewView struct {
	Base
	Overview
	PaceStale time.Duration
	Running   []backfillView // the backfills not done
}

// backfillView is a running backfill with its rate as the console saw it.
type backfillView struct {
	state.BackfillRow
	Rate float64 // rows per second; 0 until measured
	ETA  string
}

type ruleView struct {
	Base
	Page       ResultPage
	Search     string
	Before     string
	SimilarTo  string
	Similar    []Result
	SimilarErr string
}

type errorsView struct {
	Base
	Rows         []errorRow
	Total        int64
	Counts       []state.ErrorCount
	Rule, Reason string
}

type retryView struct {
	Base
	Rule, Reason string
	Key          string // one row's; "" for every row of Rule and Reason
	Count        int64
	Done         bool
	LSN          replication.LSN
}

type loginView struct {
	Base
	Why string
}

type messageView struct {
	Base
	Message string
}

// pageNames are the pages; each is parsed with the layout.
var pageNames = []string{"overview", "rule", "errors", "confirm", "login", "message"}

func parsePages() (map[string]*template.Template, error) {
	out := map[string]*template.Template{}
	for _, p := range pageNames {
		t, err := template.New(p).Funcs(funcs).ParseFS(assets, "assets/templates/layout.html", "assets/templates/"+p+".html")
		if err != nil {
			return nil, fmt.Errorf("console page %s: %w", p, err)
		}
		out[p] = t
	}
	return out, nil
}

var funcs = template.FuncMap{
	"bytes":    byteSize,
	"seconds":  seconds,
	"duration": func(d time.Duration) string { return seconds(d.Seconds()) },
	"thumb":    thumbURL,
	"ruleURL":  func(name string) string { return "/rules/" + pathEscape(name) },
	"chart":    chartOf,
	"pct":      pct,
	"deref":    func(p *int64) int64 { return *p },
	"derefs":   func(p *string) string { return *p },
	"norm":     func(f float64) string { return strconv.FormatFloat(f, 'f', 4, 64) },
	"eta":      eta,
	"utc":      func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"size": func(p *int32) int64 {
		if p == nil {
			return 0
		}
		return int64(*p)
	},
	"rate": func(done int64, elapsed time.Duration) string {
		if done <= 0 || elapsed <= 0 {
			return "–"
		}
		return strconv.FormatFloat(float64(done)/elapsed.Seconds(), 'f', 1, 64) + " rows/s"
	},
	"money": func(f float64) string { return strconv.FormatFloat(f, 'f', 4, 64) },
}

// pathEscape escapes a rule name for a path segment.
func pathEscape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.', c == '~':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// byteSize prints n bytes with a binary unit.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// seconds prints a duration in seconds the short way: 0s, 4.2s, 3m10s, 2h5m.
func seconds(s float64) string {
	switch {
	case s <= 0:
		return "0s"
	case s < 10:
		return strconv.FormatFloat(s, 'f', 1, 64) + "s"
	}
	return time.Duration(math.Round(s) * float64(time.Second)).String()
}

// pct is used/limit in percent, 0 without a limit.
func pct(used, limit int64) int64 {
	if limit <= 0 {
		return 0
	}
	return min(100, used*100/limit)
}

// eta is the time a job doing done of total in elapsed still needs, or "".
func eta(done int64, total *int64, elapsed time.Duration) string {
	if total == nil || done <= 0 || *total <= done || elapsed <= 0 {
		return ""
	}
	left := time.Duration(float64(elapsed) * float64(*total-done) / float64(done))
	return seconds(left.Seconds())
}

// chart is a small bar chart of a series, one bar a minute, the newest at
// the right of an hour's width, drawn by the server as SVG.
type chart struct {
	Bars      []bar
	Max, Last float64
	W, H      int
	Empty     bool
	Minutes   int
}

// bar is one minute's bar, in the chart's pixels.
type bar struct {
	X, Y, W, H string
}

const chartW, chartH = 180, 36

// chartOf draws series (per minute, oldest first) into a chartW × chartH box.
func chartOf(series []float64) chart {
	c := chart{W: chartW, H: chartH, Minutes: len(series)}
	if len(series) == 0 {
		c.Empty = true
		return c
	}
	for _, v := range series {
		c.Max = max(c.Max, v)
	}
	c.Last = series[len(series)-1]
	scale := 0.0
	if c.Max > 0 {
		scale = float64(chartH-2) / c.Max
	}
	bw := float64(chartW) / chartSpan
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	for i, v := range series {
		h := max(v*scale, 1) // a minute without calls is a line at the bottom
		x := float64(chartW) - float64(len(series)-i)*bw
		c.Bars = append(c.Bars, bar{X: f(x), Y: f(float64(chartH) - h), W: f(bw - 0.6), H: f(h)})
	}
	return c
}
