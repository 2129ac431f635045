package openai

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgimageai/pgimageai/provider/pace"

	"github.com/pgimageai/pgimageai/provider"
)

// Bounds of what a self-hosted server is asked of its queue.
const (
	maxSignalBytes = 1 << 20          // of an answer of /props or /metrics
	signalTimeout  = 2 * time.Second  // of one question
	pollEvery      = time.Second      // how often /metrics is read while calls run
	retryDiscovery = 10 * time.Second // after a server that did not answer at all
)

// isSelfHosted reports whether base names a server of the operator's
// rather than a hosted API: a loopback or private address (RFC 1918,
// RFC 4193, link-local), localhost, or a host name of one label (a
// container's name on a compose network: "vllm", "llama"). The name is not
// resolved: what a name resolves to can change, and the decision is made
// once, when the model is loaded.
func isSelfHosted(base string) bool {
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap()
		return a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsUnspecified()
	}
	return host == "localhost" || strings.HasSuffix(host, ".localhost") || strings.HasSuffix(host, ".local") ||
		(host != "" && !strings.Contains(host, "."))
}

// server asks a self-hosted server of its queue, for the model's governor:
// llama.cpp's GET /props total_slots (tools/server/README.md, "GET /props":
// the slots it serves at once, its --parallel) once; else vLLM's
// vllm:num_requests_waiting gauge in GET /metrics (the Prometheus text
// format; https://docs.vllm.ai/en/latest/usage/metrics.html), read at most
// once a second while calls run, by the call that finds it stale. A server
// with neither (Ollama, LM Studio) is governed by its latency per output
// token. It is safe for concurrent use.
type server struct {
	root   string // base_url without its /v1
	key    string
	client *http.Client

	mu      sync.Mutex
	known   atomic.Bool // /props and /metrics were asked
	nextTry time.Time   // when to ask again after no answer at all
	metrics atomic.Bool
	polling atomic.Bool
	polled  atomic.Int64 // Unix nanoseconds of the last read of /metrics
}

func newServer(base, key string) *server {
	root := strings.TrimSuffix(strings.TrimSuffix(base, "/"), "/v1")
	c := provider.NewHTTPClient(nil) // never a redirect: the request carries the key
	c.Timeout = signalTimeout
	return &server{root: root, key: key, client: c}
}

// check tells gov what the server says of its queue, when it is time to
// ask: on the first call, and then (vLLM) once a second.
func (s *server) check(ctx context.Context, gov *pace.Governor) {
	if !s.discovered(ctx, gov) || !s.metrics.Load() {
		return
	}
	now := time.Now()
	if now.UnixNano()-s.polled.Load() < int64(pollEvery) || !s.polling.CompareAndSwap(false, true) {
		return
	}
	defer s.polling.Store(false)
	s.polled.Store(now.UnixNano())
	if waiting, ok := s.waiting(ctx); ok {
		gov.ServerQueue(waiting)
	}
}

// discovered asks the server what it exposes, once, and reports whether
// that is known.
func (s *server) discovered(ctx context.Context, gov *pace.Governor) bool {
	if s.known.Load() {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.known.Load() || time.Now().Before(s.nextTry) {
		return s.known.Load()
	}
	var pr struct {
		TotalSlots int `json:"total_slots"`
	}
	body, status, err := s.get(ctx, "/props")
	if err != nil && status == 0 {
		s.nextTry = time.Now().Add(retryDiscovery) // not up yet
		return false
	}
	defer s.known.Store(true)
	if status == http.StatusOK && json.Unmarshal(body, &pr) == nil && pr.TotalSlots > 0 {
		gov.ServerSlots(pr.TotalSlots)
		return true
	}
	if waiting, ok := s.waiting(ctx); ok {
		s.metrics.Store(true)
		s.polled.Store(time.Now().UnixNano())
		gov.ServerQueue(waiting)
	}
	return true
}

// waiting reads vllm:num_requests_waiting from /metrics: the sum of its
// series (one per model name), and whether there was one.
func (s *server) waiting(ctx context.Context) (int, bool) {
	body, status, err := s.get(ctx, "/metrics")
	if err != nil || status != http.StatusOK {
		return 0, false
	}
	return parseWaiting(string(body))
}

// parseWaiting sums the samples of vllm:num_requests_waiting in a
// Prometheus text exposition: `vllm:num_requests_waiting{model_name="m"} 3.0`.
func parseWaiting(text string) (int, bool) {
	const name = "vllm:num_requests_waiting"
	total, found := 0.0, false
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue // another metric whose name starts so
		}
		if i := strings.LastIndexByte(rest, '}'); i >= 0 {
			rest = rest[i+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil || v < 0 || v > 1e9 {
			continue
		}
		total, found = total+v, true
	}
	return int(total), found
}

// get reads path of the server's root, bounded in time and bytes; status 0
// means no answer at all.
func (s *server) get(ctx context.Context, path string) ([]byte, int, error) {
	ctx, cancel := context.WithTimeout(ctx, signalTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.root+path, nil)
	if err != nil {
		return nil, -1, err
	}
	if s.key != "" {
		req.Header.Set("Authorization", "Bearer "+s.key)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxSignalBytes))
	return body, resp.StatusCode, err
}
