package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The dashboard and the alerting rules of deploy/ name metrics by hand; these tests check
// them against what this package exports, so that a renamed metric cannot leave a panel
// blank or an alert silent.
const (
	dashboardFile = "../deploy/grafana/pgimageai.json"
	alertsFile    = "../deploy/prometheus/alerts.yaml"
)

// metricName matches a metric name of ours or of the Go and process collectors.
var metricName = regexp.MustCompile(`\b(?:pgimageai|go|process)_[a-z0-9_]+`)

// exported returns every series name a scrape of an exercised Metrics can show:
// families, and a histogram's _bucket, _sum and _count.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	m := New()
	safe := int64(1 << 30)
	m.SetStatus(func() Status {
		return Status{Leader: true, Streaming: true, ServerWALEnd: 2, Confirmed: 1, Lanes: []Lane{{Name: "t", Pending: 1}},
			Models: []Model{{Name: "m"}}}
	})
	m.SetSlotSource(func(context.Context) (Slot, error) {
		return Slot{Name: "s", Found: true, Active: true, WALStatus: "reserved", SafeWALSize: &safe, RetainedBytes: 1}, nil
	})
	m.Change("insert")
	m.Call("r", "m", "ok", time.Second)
	m.Retry("m")
	m.CacheHit("r")
	m.Written(map[string]int{"upsert": 1}, map[string]int{"empty_image": 1})
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
		if f.GetType().String() == "HISTOGRAM" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[f.GetName()+s] = true
			}
		}
	}
	return names
}

// dashboardExprs returns the PromQL of every panel target of the Grafana dashboard.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.UID == "" {
		t.Errorf("%s has no uid", dashboardFile)
	}
	var exprs []string
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q has an empty query", p.Title)
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	return exprs
}

func TestDeployMetricNamesExist(t *testing.T) {
	names := exported(t)
	alerts, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		dashboardFile: strings.Join(dashboardExprs(t), "\n"),
		alertsFile:    string(alerts),
	}
	// What the issue asks each to show: lag (bytes and seconds), rows by op, calls by
	// outcome and model, latency, bytes in flight, errors by reason, leader; and the
	// alerts on slot lag, apply delay, error rate, no leader and wal_status.
	required := map[string][]string{
		dashboardFile: {"pgimageai_replication_lag_bytes", "pgimageai_last_applied_commit_timestamp_seconds", "pgimageai_changes_total",
			"pgimageai_rows_written_total", "pgimageai_provider_calls_total", "pgimageai_provider_call_duration_seconds_bucket",
			"pgimageai_bytes_in_flight", "pgimageai_errors_total", "pgimageai_leader", "pgimageai_slot_wal_status"},
		alertsFile: {"pgimageai_replication_lag_bytes", "pgimageai_last_applied_commit_timestamp_seconds", "pgimageai_provider_calls_total",
			"pgimageai_leader", "pgimageai_slot_wal_status", "pgimageai_slot_retained_wal_bytes", "pgimageai_lane_stalled_seconds",
			"pgimageai_model_rate_limited"},
	}
	for file, text := range files {
		used := metricName.FindAllString(text, -1)
		if len(used) == 0 {
			t.Errorf("%s names no metric", file)
		}
		for _, n := range used {
			if !names[n] {
				t.Errorf("%s uses %s, which pgimageai does not export", file, n)
			}
		}
		for _, n := range required[file] {
			if !slices.Contains(used, n) {
				t.Errorf("%s does not show %s", file, n)
			}
		}
	}
}

// TestDashboardQueriesParse has promtool parse every dashboard query (with Grafana's
// variables replaced), as recording rules. Without promtool it skips, except under CI.
func TestDashboardQueriesParse(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatal("promtool is missing (Debian package prometheus); .ci/run installs it")
		}
		t.Skip("promtool is not installed (apt-get install prometheus)") // ok-to-skip: outside CI only
	}
	vars := strings.NewReplacer("$__rate_interval", "5m", "$job", ".*", "$instance", ".*")
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range dashboardExprs(t) {
		q, _ := json.Marshal(vars.Replace(e)) // a JSON string is a YAML string
		fmt.Fprintf(&b, "      - record: dashboard:query%d\n        expr: %s\n", i, q)
	}
	f := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", f).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules on the dashboard's queries: %v\n%s", err, out)
	}
}
