package metrics

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves /metrics (Prometheus text format) and /healthz: 200 while
// the stream is streaming, 503 otherwise (connecting, reconnecting, or
// waiting as a standby), with the state as a small JSON body.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		s := m.Status()
		state := "streaming"
		switch {
		case !s.Leader:
			state = "standby"
		case !s.Streaming:
			state = "disconnected"
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if state != "streaming" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(struct {
			State    string `json:"state"`
			LagBytes uint64 `json:"lag_bytes"`
		}{state, s.LagBytes()})
	})
	return mux
}
