package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/internal/fakeapi"
)

// Test images: byte-exact fixtures whose data URLs are written out in the
// expected JSON.
var (
	pngImage  = fakeapi.PNG
	pngURL    = fakeapi.PNGURL
	jpegImage = provider.Image{Data: []byte{0xFF, 0xD8, 0xFF, 0xE0}, MIME: "image/jpeg"}
	jpegURL   = "data:image/jpeg;base64,/9j/4A=="
)

const okBody = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m",
 "choices":[{"index":0,"message":{"role":"assistant","content":"a red square"},"finish_reason":"stop"}],
 "usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`

// answer is one scripted response of fakeServer.
type answer struct {
	status int
	header map[string]string
	body   string
	delay  time.Duration // waits this long, or until the client gives up
}

var ok200 = answer{status: 200, body: okBody}

// received is what fakeServer saw of one request.
type received struct {
	method, path, auth, contentType string
	hasAuth                         bool
	body                            any // decoded JSON
	raw                             []byte
}

// fakeServer answers request i with answers[i]; the last answer repeats.
// It counts requests in flight.
type fakeServer struct {
	*httptest.Server
	mu       sync.Mutex
	answers  []answer
	reqs     []received
	inFlight int
	peak     int
}

func newFakeServer(t testing.TB, answers ...answer) *fakeServer {
	t.Helper()
	if len(answers) == 0 {
		answers = []answer{ok200}
	}
	s := &fakeServer{answers: answers}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && (strings.HasSuffix(r.URL.Path, "/props") || strings.HasSuffix(r.URL.Path, "/metrics")) {
		// A loopback server is self-hosted: the provider asks it of its
		// queue (server.go), which server_test.go tests. This one has none.
		http.NotFound(w, r)
		return
	}
	raw, _ := io.ReadAll(r.Body)
	var body any
	_ = json.Unmarshal(raw, &body)
	auth, hasAuth := r.Header["Authorization"]
	rec := received{method: r.Method, path: r.URL.Path, contentType: r.Header.Get("Content-Type"),
		hasAuth: hasAuth, body: body, raw: raw}
	if hasAuth {
		rec.auth = auth[0]
	}

	s.mu.Lock()
	a := s.answers[min(len(s.reqs), len(s.answers)-1)]
	s.reqs = append(s.reqs, rec)
	s.inFlight++
	s.peak = max(s.peak, s.inFlight)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()

	if a.delay > 0 {
		select {
		case <-time.After(a.delay):
		case <-r.Context().Done():
			return
		}
	}
	for k, v := range a.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	io.WriteString(w, expand(a.body, rec))
}

// expand lets a scripted body echo the request's Authorization header
// ({{auth}}), the way a careless gateway might.
func expand(body string, r received) string {
	return strings.ReplaceAll(body, "{{auth}}", r.auth)
}

func (s *fakeServer) requests() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.reqs...)
}

// waitRecorder replaces the Retrier's sleep: it records the waits asked for
// and returns at once.
type waitRecorder struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (w *waitRecorder) sleep(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	w.waits = append(w.waits, d)
	w.mu.Unlock()
	return ctx.Err()
}

// testModel is a model row pointing at base.
func testModel(base, options string) provider.Model {
	return provider.Model{Name: "captioner", Provider: "openai", BaseURL: base, Model: "gpt-4o-mini",
		Options: json.RawMessage(options)}
}

// mapEnv is a provider.Env over a map.
func mapEnv(m map[string]string) provider.Env {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// newTestProvider builds a provider for m whose retry waits are recorded,
// not slept.
func newTestProvider(t testing.TB, m provider.Model, env map[string]string) (*Provider, *waitRecorder) {
	t.Helper()
	p, err := New(m, mapEnv(env))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	rec := &waitRecorder{}
	p.retrier.Sleep = rec.sleep
	return p, rec
}

// duplicateKey returns the first key that occurs twice in one object of raw,
// or "": decoding into a map would hide a key the body repeats.
func duplicateKey(t testing.TB, raw []byte) string {
	t.Helper()
	type frame struct {
		obj, wantKey bool
		keys         map[string]bool
	}
	var stack []*frame
	top := func() *frame {
		if len(stack) == 0 {
			return nil
		}
		return stack[len(stack)-1]
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return ""
		}
		if err != nil {
			t.Fatalf("body is not JSON: %v", err)
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, &frame{obj: true, wantKey: true, keys: map[string]bool{}})
				continue
			case '[':
				stack = append(stack, &frame{})
				continue
			default:
				stack = stack[:len(stack)-1]
			}
		case string:
			if f := top(); f != nil && f.obj && f.wantKey {
				if f.keys[v] {
					return v
				}
				f.keys[v], f.wantKey = true, false
				continue
			}
		}
		if f := top(); f != nil && f.obj { // a value is complete
			f.wantKey = true
		}
	}
}
