package metrics

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Health states reported by /healthz and /readyz.
const (
	StateStreaming    = "streaming"    // the leader, streaming
	StateStandby      = "standby"      // another instance leads; this one waits, connected
	StateDisconnected = "disconnected" // the leader, reconnecting its stream
	StateStarting     = "starting"     // neither yet: connecting, or the source is unreachable
	StateStalled      = "stalled"      // the leader streams, but a lane has written nothing for StallAfter
)

// Stalled returns the lanes that have held changes without writing any for
// longer than s.StallAfter.
func (s Status) Stalled() []string {
	var out []string
	for _, l := range s.Lanes {
		if s.StallAfter > 0 && l.Stalled > s.StallAfter {
			out = append(out, l.Name)
		}
	}
	return out
}

// State names the bridge's state in s.
func (s Status) State() string {
	switch {
	case s.Leader && s.Streaming:
		return StateStreaming
	case s.Leader:
		return StateDisconnected
	case s.Standby:
		return StateStandby
	}
	return StateStarting
}

// Handler serves /metrics (Prometheus text format) and three health checks, each with
// the state as a small JSON body:
//
//   - /healthz: 200 only while this instance streams (the leader) and no lane has held
//     changes without writing for StallAfter; 503 while it reconnects, waits as a standby,
//     or has a stalled lane ("stalled", with the lanes). It answers "who streams, and
//     does it move?"; "standby" is also what a process says that has not reached its
//     source yet.
//   - /readyz: 200 while this instance streams or waits as a standby with a working
//     connection to the source (a standby is ready: it takes over within a second); 503
//     while it connects, reconnects or cannot reach the source. For readiness probes and
//     the container health check (pgimageai health).
//   - /livez: 200 while the process serves HTTP. For liveness probes: an unrecoverable
//     error ends the process by itself (exit 1), and a source outage is waited out, which
//     a restart would not shorten.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		s := m.Status()
		state := s.State()
		if state == StateStarting {
			state = StateStandby // /healthz has always said standby before the first lock attempt
		}
		stalled := s.Stalled()
		if state == StateStreaming && len(stalled) > 0 {
			state = StateStalled
		}
		writeHealth(w, state == StateStreaming, state, s.LagBytes(), stalled...)
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		s := m.Status()
		state := s.State()
		writeHealth(w, state == StateStreaming || state == StateStandby, state, s.LagBytes())
	})
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) {
		writeHealth(w, true, "alive", 0)
	})
	return mux
}

func writeHealth(w http.ResponseWriter, ok bool, state string, lag uint64, stalled ...string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(struct {
		State        string   `json:"state"`
		LagBytes     uint64   `json:"lag_bytes"`
		StalledLanes []string `json:"stalled_lanes,omitempty"`
	}{state, lag, stalled})
}
