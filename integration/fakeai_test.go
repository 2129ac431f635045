package integration_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/magic"
)

// aiRequest is one recorded chat completion request.
type aiRequest struct {
	Path    string
	Model   string
	Prompt  string
	DataURL string
	Body    map[string]any
}

// fakeAI is an OpenAI-compatible /chat/completions server that records every
// request. Its answer is captionOf the data URL — distinct per image, so
// tests can tell which image a result came from; respond overrides that.
type fakeAI struct {
	*httptest.Server
	mu       sync.Mutex
	requests []aiRequest
	// respond, when set, decides the answer: a status other than 200 sends
	// an OpenAI error body with that status.
	respond func(r aiRequest) (status int, text string)
	delay   time.Duration
	// hook, when set, sees each request after it was recorded and may answer
	// it itself (hang, garbage, a cut body): it returns true when it did.
	hook func(w http.ResponseWriter, r *http.Request, req aiRequest) bool
}

func newFakeAI(tb testing.TB) *fakeAI {
	tb.Helper()
	f := &fakeAI{}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	tb.Cleanup(f.Close)
	return f
}

// URL returns the base URL to store in pgimageai.models.base_url.
func (f *fakeAI) BaseURL() string { return f.Server.URL + "/v1" }

func (f *fakeAI) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && (r.URL.Path == "/props" || r.URL.Path == "/metrics") {
		// A loopback server is self-hosted: the provider asks it of its
		// queue (llama.cpp's /props, vLLM's /metrics). This one has none.
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req aiRequest
	req.Path = r.URL.Path
	_ = json.Unmarshal(body, &req.Body)
	req.Model, _ = req.Body["model"].(string)
	if msgs, ok := req.Body["messages"].([]any); ok && len(msgs) > 0 {
		last, _ := msgs[len(msgs)-1].(map[string]any)
		parts, _ := last["content"].([]any)
		for _, p := range parts {
			part, _ := p.(map[string]any)
			switch part["type"] {
			case "text":
				req.Prompt, _ = part["text"].(string)
			case "image_url":
				iu, _ := part["image_url"].(map[string]any)
				req.DataURL, _ = iu["url"].(string)
			}
		}
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	respond, delay, hook := f.respond, f.delay, f.hook
	f.mu.Unlock()
	if hook != nil && hook(w, r, req) {
		return
	}
	if delay > 0 {
		time.Sleep(delay)
	}
	status, text := http.StatusOK, captionOf(req.DataURL)
	if respond != nil {
		status, text = respond(req)
	}
	w.Header().Set("Content-Type", "application/json")
	if status != http.StatusOK {
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"message":%q,"type":"invalid_request_error"}}`, text)
		return
	}
	json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": text}}},
		"usage": map[string]any{"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16},
	})
}

// Requests returns a copy of the recorded requests.
func (f *fakeAI) Requests() []aiRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]aiRequest(nil), f.requests...)
}

// Count returns how many requests were recorded.
func (f *fakeAI) Count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

// Set changes the server's behaviour.
func (f *fakeAI) Set(delay time.Duration, respond func(aiRequest) (int, string)) {
	f.mu.Lock()
	f.delay, f.respond = delay, respond
	f.mu.Unlock()
}

// SetHook installs (or, with nil, removes) a hook that may answer requests
// itself; see fakeAI.hook.
func (f *fakeAI) SetHook(hook func(w http.ResponseWriter, r *http.Request, req aiRequest) bool) {
	f.mu.Lock()
	f.hook = hook
	f.mu.Unlock()
}

// captionOf returns the answer the default behaviour gives for an image's
// data URL: a digest of the whole URL, so that a result written under
// another row's key never passes for the row's own (the URL's tail, say, is
// the same for every PNG: its IEND chunk).
func captionOf(dataURL string) string {
	sum := sha256.Sum256([]byte(dataURL))
	return "caption:" + hex.EncodeToString(sum[:8])
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// hasPrefix reports whether a recorded data URL has the media type want.
func hasPrefix(url, mime string) bool { return strings.HasPrefix(url, "data:"+mime+";base64,") }

// TestFakeCaptionsDistinct: the fake's default answer tells every test image
// apart, so a check that each row got its own caption fails when a result is
// written under another row's key.
func TestFakeCaptionsDistinct(t *testing.T) {
	const n = 2000
	seen := make(map[string]int, n)
	for i := range n {
		c := captionOf(magic.DataURL(magic.PNG, pngImage(t, i)))
		if j, ok := seen[c]; ok {
			t.Fatalf("images %d and %d get the same caption %q", j, i, c)
		}
		seen[c] = i
	}
}
