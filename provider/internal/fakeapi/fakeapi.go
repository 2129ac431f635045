// Package fakeapi is the test kit of the embedding providers: an httptest
// server that records requests and answers them from a script or by echoing
// per-input vectors, and Suite, the behaviour every embedding provider shares
// (retries, errors, key scrubbing, batching), run against a provider's own
// request and answer shapes.
//
// Layer: test.
package fakeapi

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/provider"
)

// Answer is one scripted response; Status 0 = echo.
type Answer struct {
	Status int
	Header map[string]string
	Body   string // "{{auth}}" is replaced by the request's Authorization header
	Delay  time.Duration
}

// Request is what the server saw of one request.
type Request struct {
	Method, Path string
	Header       http.Header
	Body         map[string]any // decoded JSON; nil when not an object
	Raw          []byte
}

// Server is a fake API. With no script, it answers every request with
// Echo(inputs) where inputs are Inputs(body). It is safe for concurrent use.
type Server struct {
	*httptest.Server
	// Inputs extracts a request's image payloads in order; Echo builds the
	// 200 answer for their vectors (see Vector) and token count.
	Inputs func(body map[string]any) []string
	Echo   func(vecs [][]float32, tokens int) string
	Delay  time.Duration // of echo answers
	// Refuse, when set, makes an echo answer fail with Refusal when any
	// input of the request is refused: the way a real service fails a whole
	// batch for one image it cannot decode.
	Refuse  func(input string) bool
	Refusal Answer

	mu      sync.Mutex
	script  []Answer
	reqs    []Request
	served  int
	decoded int
}

// NewServer starts a server that plays script in order (the last answer
// repeats) or, with an empty script, echoes.
func NewServer(t testing.TB, inputs func(map[string]any) []string, echo func([][]float32, int) string, script ...Answer) *Server {
	t.Helper()
	s := &Server{Inputs: inputs, Echo: echo, script: script}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	s.mu.Lock()
	s.reqs = append(s.reqs, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Raw: raw})
	var a Answer
	if len(s.script) > 0 {
		a = s.script[min(len(s.reqs)-1, len(s.script)-1)]
	}
	if a.Status == 0 { // echo
		inputs := s.Inputs(body)
		vecs := make([][]float32, len(inputs))
		for i, in := range inputs {
			vecs[i] = Vector(in)
		}
		a = Answer{Status: 200, Body: s.Echo(vecs, 10*len(inputs)), Delay: s.Delay}
		if s.Refuse != nil && slices.ContainsFunc(inputs, s.Refuse) {
			a = s.Refusal
		}
	}
	s.mu.Unlock()
	if a.Delay > 0 {
		select {
		case <-time.After(a.Delay):
		case <-r.Context().Done():
			return
		}
	}
	for k, v := range a.Header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.Status)
	io.WriteString(w, strings.ReplaceAll(a.Body, "{{auth}}", r.Header.Get("Authorization")))
}

// Requests returns the requests seen so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Vector is the echo server's vector for an input: three values derived from
// its text, distinct for distinct inputs with overwhelming probability.
func Vector(input string) []float32 {
	h := fnv.New64a()
	io.WriteString(h, input)
	x := h.Sum64()
	return []float32{float32(x&0xffff) / 0xffff, float32(x>>16&0xffff) / 0xffff, float32(x>>32&0xffff) / 0xffff}
}

// WaitRecorder replaces a Retrier's Sleep: it records the waits asked for
// and returns at once.
type WaitRecorder struct {
	mu    sync.Mutex
	Waits []time.Duration
}

// Sleep records d.
func (w *WaitRecorder) Sleep(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	w.Waits = append(w.Waits, d)
	w.mu.Unlock()
	return ctx.Err()
}

// Env is a provider.Env over a map.
func Env(m map[string]string) provider.Env {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// Image returns a small PNG-signed image whose bytes spell seed.
func Image(seed int) provider.Image {
	return provider.Image{MIME: "image/png",
		Data: []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n', byte(seed), byte(seed >> 8), byte(seed >> 16), 0}}
}

// PNG is a byte-exact 12-byte PNG-signed fixture, and PNGURL its data URL
// written out by hand, so that a test checks the encoding, not the encoder.
var (
	PNG    = provider.Image{Data: []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n', 0, 0, 0, 0x0D}, MIME: "image/png"}
	PNGURL = "data:image/png;base64,iVBORw0KGgoAAAAN"
)
