package metrics

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestHealthz(t *testing.T) {
	tests := []struct {
		name       string
		status     *Status // nil: no source installed
		wantCode   int
		wantState  string
		wantLagged uint64
	}{
		{"no bridge yet", nil, http.StatusServiceUnavailable, "standby", 0},
		{"standby", &Status{}, http.StatusServiceUnavailable, "standby", 0},
		{"leader reconnecting", &Status{Leader: true, ServerWALEnd: 900, Confirmed: 100}, http.StatusServiceUnavailable, "disconnected", 800},
		{"streaming", &Status{Leader: true, Streaming: true, ServerWALEnd: 5000, Confirmed: 4000}, http.StatusOK, "streaming", 1000},
		{"slot ahead of the known WAL end", &Status{Leader: true, Streaming: true, ServerWALEnd: 10, Confirmed: 20}, http.StatusOK, "streaming", 0},
		{"a lane stalled", &Status{Leader: true, Streaming: true, ServerWALEnd: 10, Confirmed: 5, StallAfter: 10 * time.Minute,
			Lanes: []Lane{{Name: "public.ok", Pending: 1, Stalled: time.Second}, {Name: "public.stuck", Pending: 3, Stalled: 11 * time.Minute}}},
			http.StatusServiceUnavailable, "stalled", 5},
		{"a lane slow but within StallAfter", &Status{Leader: true, Streaming: true, StallAfter: 10 * time.Minute,
			Lanes: []Lane{{Name: "public.slow", Pending: 3, Stalled: 9 * time.Minute}}}, http.StatusOK, "streaming", 0},
		{"stall check off", &Status{Leader: true, Streaming: true,
			Lanes: []Lane{{Name: "public.stuck", Pending: 3, Stalled: time.Hour}}}, http.StatusOK, "streaming", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New()
			if tt.status != nil {
				st := *tt.status
				m.SetStatus(func() Status { return st })
			}
			rec := httptest.NewRecorder()
			m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
			if rec.Code != tt.wantCode {
				t.Errorf("code %d, want %d", rec.Code, tt.wantCode)
			}
			var body struct {
				State        string   `json:"state"`
				LagBytes     uint64   `json:"lag_bytes"`
				StalledLanes []string `json:"stalled_lanes"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q: %v", rec.Body.String(), err)
			}
			if body.State != tt.wantState || body.LagBytes != tt.wantLagged {
				t.Errorf("body %+v, want state %s lag %d", body, tt.wantState, tt.wantLagged)
			}
			if tt.wantState == "stalled" && (len(body.StalledLanes) != 1 || body.StalledLanes[0] != "public.stuck") {
				t.Errorf("stalled lanes %v, want [public.stuck]", body.StalledLanes)
			}
		})
	}
}

func TestReadyzLivez(t *testing.T) {
	tests := []struct {
		name      string
		status    *Status // nil: no source installed
		path      string
		wantCode  int
		wantState string
	}{
		{"ready: no bridge yet", nil, "/readyz", http.StatusServiceUnavailable, "starting"},
		{"ready: source unreachable, not leading", &Status{}, "/readyz", http.StatusServiceUnavailable, "starting"},
		{"ready: standby", &Status{Standby: true}, "/readyz", http.StatusOK, "standby"},
		{"ready: leader reconnecting", &Status{Leader: true}, "/readyz", http.StatusServiceUnavailable, "disconnected"},
		{"ready: streaming", &Status{Leader: true, Streaming: true}, "/readyz", http.StatusOK, "streaming"},
		{"healthz: standby stays 503", &Status{Standby: true}, "/healthz", http.StatusServiceUnavailable, "standby"},
		{"live: no bridge yet", nil, "/livez", http.StatusOK, "alive"},
		{"live: reconnecting", &Status{Leader: true}, "/livez", http.StatusOK, "alive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New()
			if tt.status != nil {
				st := *tt.status
				m.SetStatus(func() Status { return st })
			}
			rec := httptest.NewRecorder()
			m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.path, nil))
			var body struct {
				State string `json:"state"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q: %v", rec.Body.String(), err)
			}
			if rec.Code != tt.wantCode || body.State != tt.wantState {
				t.Errorf("%s: %d %s, want %d %s", tt.path, rec.Code, body.State, tt.wantCode, tt.wantState)
			}
		})
	}
}

func TestMetricsExposition(t *testing.T) {
	m := New()
	m.SetStatus(func() Status {
		return Status{Leader: true, Streaming: true, ServerWALEnd: 3 << 20, Confirmed: 1 << 20, BytesInFlight: 4096, Reconnects: 2,
			Applied: time.Unix(1700000000, 500_000_000),
			Lanes: []Lane{
				{Name: "public.fast", Pending: 0, Applied: 3 << 20, CommitTime: time.Unix(1700000100, 0)},
				{Name: "public.slow", Pending: 7, Applied: 1 << 19, CommitTime: time.Unix(1700000000, 0)},
			}}
	})
	m.Change("insert")
	m.Change("insert")
	m.Change("delete")
	m.Call("caption", "vision", "ok", 120*time.Millisecond)
	m.Call("caption", "vision", "bad_response", 3*time.Second)
	m.Retry("vision")
	m.CacheHit("caption")
	m.Written(map[string]int{"upsert": 5, "delete": 1}, map[string]int{"unknown_format": 2})
	m.Written(nil, nil)

	if got := testutil.ToFloat64(m.changes.WithLabelValues("insert")); got != 2 {
		t.Errorf("changes{insert} = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.calls.WithLabelValues("caption", "vision", "bad_response")); got != 1 {
		t.Errorf("calls{bad_response} = %v, want 1", got)
	}
	if n := testutil.CollectAndCount(m.latency); n != 1 {
		t.Errorf("%d latency series, want 1", n)
	}

	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	text := string(body)
	for _, want := range []string{
		`pgimageai_changes_total{op="delete"} 1`,
		`pgimageai_provider_calls_total{model="vision",outcome="ok",rule="caption"} 1`,
		`pgimageai_provider_call_duration_seconds_count{model="vision",rule="caption"} 2`,
		`pgimageai_provider_retries_total{model="vision"} 1`,
		`pgimageai_cache_hits_total{rule="caption"} 1`,
		`pgimageai_rows_written_total{op="upsert"} 5`,
		`pgimageai_errors_total{reason="unknown_format"} 2`,
		`pgimageai_batches_total 2`,
		`pgimageai_last_applied_commit_timestamp_seconds 1.7000000005e+09`,
		`pgimageai_replication_lag_bytes 2.097152e+06`,
		`pgimageai_bytes_in_flight 4096`,
		`pgimageai_streaming 1`,
		`pgimageai_leader 1`,
		`pgimageai_replication_reconnects_total 2`,
		`go_goroutines `,
		// Below the confirmed LSN every lane has applied everything, so
		// the slow lane's lag counts from the confirmed LSN.
		`pgimageai_lane_pending_changes{lane="public.slow"} 7`,
		`pgimageai_lane_lag_bytes{lane="public.slow"} 2.097152e+06`,
		`pgimageai_lane_lag_bytes{lane="public.fast"} 0`,
		`pgimageai_lane_last_applied_commit_timestamp_seconds{lane="public.fast"} 1.7000001e+09`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestNilMetricsRecordsNothing(t *testing.T) {
	var m *Metrics
	m.Change("insert")
	m.Call("r", "m", "ok", time.Second)
	m.Retry("m")
	m.CacheHit("r")
	m.Written(map[string]int{"upsert": 1}, nil)
	m.SetStatus(func() Status { return Status{Streaming: true} })
	if s := m.Status(); s.Streaming {
		t.Errorf("nil Metrics reported %+v", s)
	}
}
