package openai

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/pace"
)

func TestIsSelfHosted(t *testing.T) {
	tests := []struct {
		base string
		want bool
	}{
		{"https://api.openai.com/v1", false},
		{"https://myres.openai.azure.com/openai/deployments/x", false},
		{"https://api.groq.com/openai/v1", false},
		{"http://127.0.0.1:8080/v1", true},
		{"http://[::1]:8080/v1", true},
		{"http://localhost:11434/v1", true},
		{"http://10.1.2.3:8000/v1", true},
		{"http://192.168.1.20/v1", true},
		{"http://172.16.0.5/v1", true},
		{"http://[fd00::5]/v1", true},
		{"http://vllm:8000/v1", true},        // a container's name on a compose network
		{"http://gpu-box.local/v1", true},    // mDNS
		{"http://8.8.8.8/v1", false},         // a public address
		{"http://llm.example.com/v1", false}, // a public name: a gateway, say
	}
	for _, tt := range tests {
		if got := isSelfHosted(tt.base); got != tt.want {
			t.Errorf("isSelfHosted(%q) = %v, want %v", tt.base, got, tt.want)
		}
	}
}

// TestParseWaiting reads vllm:num_requests_waiting the way vLLM's /metrics
// exposes it (https://docs.vllm.ai/en/latest/usage/metrics.html: a gauge
// with a model_name label), summed over its series, and no other metric
// whose name starts so.
func TestParseWaiting(t *testing.T) {
	tests := []struct {
		name, text string
		want       int
		ok         bool
	}{
		{name: "one model", text: "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"m\"} 3.0\nvllm:num_requests_running{model_name=\"m\"} 16.0\n", want: 3, ok: true},
		{name: "two engines", text: "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 2.0\nvllm:num_requests_waiting{engine=\"1\",model_name=\"m\"} 5.0\n", want: 7, ok: true},
		{name: "none waiting", text: "vllm:num_requests_waiting{model_name=\"m\"} 0.0\n", want: 0, ok: true},
		{name: "without labels", text: "vllm:num_requests_waiting 4\n", want: 4, ok: true},
		{name: "another metric of that prefix", text: "vllm:num_requests_waiting_by_reason{reason=\"x\"} 9\n", ok: false},
		{name: "not vLLM", text: "llamacpp:requests_processing 2\n", ok: false},
		{name: "garbage value", text: "vllm:num_requests_waiting{model_name=\"m\"} NaN-ish\n", ok: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseWaiting(tt.text)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("parseWaiting = %d, %v; want %d, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestLlamaSlotsNo503s: a llama.cpp-style server with fewer slots than
// max_concurrency (GET /props total_slots 4, tools/server/README.md; the
// rest of what it gets waits, up to one request a slot, and anything past
// that is a 503, as a bounded queue in front of it answers): the model's
// limit follows the slots — two a slot — and the server answers no 503.
func TestLlamaSlotsNo503s(t *testing.T) {
	const slots, requests = 4, 240
	var busy, waiting, peak, refused atomic.Int64
	sem := make(chan struct{}, slots)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			if r.URL.Path == "/props" {
				fmt.Fprintf(w, `{"total_slots":%d,"media_marker":"<__media__>"}`, slots)
				return
			}
			http.NotFound(w, r)
			return
		}
		io.Copy(io.Discard, r.Body)
		if n := waiting.Add(1); n > 2*slots {
			waiting.Add(-1)
			refused.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":{"code":503,"message":"the queue is full","type":"unavailable_error"}}`)
			return
		}
		sem <- struct{}{}
		n := busy.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(10 * time.Millisecond)
		busy.Add(-1)
		<-sem
		waiting.Add(-1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, okBody)
	}))
	defer srv.Close()
	p, err := New(provider.Model{Name: "m", Provider: "openai", BaseURL: srv.URL + "/v1", Model: "m", Options: []byte(`{"max_concurrency":16}`)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	jobs := make(chan struct{}, requests)
	for range requests {
		jobs <- struct{}{}
	}
	close(jobs)
	img := provider.Image{Data: pngImage.Data, MIME: "image/png"}
	for range 16 { // the bridge's workers of the model: max_concurrency of them
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				if _, err := p.GenerateText(t.Context(), img, "x"); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	s := p.Pace().Snapshot()
	if refused.Load() != 0 || s.Limit != 2*slots || s.LimitBy != pace.BySlots {
		t.Fatalf("%d answers 503; limit %d by %q: want none, and %d by %q", refused.Load(), s.Limit, s.LimitBy, 2*slots, pace.BySlots)
	}
	if peak.Load() != slots {
		t.Errorf("the server ran %d at once, want its %d slots kept busy", peak.Load(), slots)
	}
}

// TestVLLMQueueSignal: a vLLM server's /metrics says how many requests
// wait (vllm:num_requests_waiting): the limit comes down to what it runs
// of ours while some wait, and the snapshot says why.
func TestVLLMQueueSignal(t *testing.T) {
	var waiting atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/metrics":
			fmt.Fprintf(w, "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"m\"} %d.0\n", waiting.Load())
		case r.Method == http.MethodGet:
			http.NotFound(w, r)
		default:
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, okBody)
		}
	}))
	defer srv.Close()
	p, err := New(provider.Model{Name: "m", Provider: "openai", BaseURL: srv.URL + "/v1", Model: "m", Options: []byte(`{"max_concurrency":32}`)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	img := provider.Image{Data: pngImage.Data, MIME: "image/png"}
	waiting.Store(100) // more waiting than we have in flight: one of ours runs, at most
	if _, err := p.GenerateText(t.Context(), img, "x"); err != nil {
		t.Fatal(err)
	}
	if s := p.Pace().Snapshot(); s.Limit != 1 || s.LimitBy != pace.ByQueue {
		t.Fatalf("limit %d by %q with 100 waiting, want 1 by %q", s.Limit, s.LimitBy, pace.ByQueue)
	}
}
