package integration_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestProviderRedirectNotFollowed: a model's server that answers 307 to a
// server on another port — Go's default client would POST the image there
// again with the key — leaves a provider_error row naming the status and the
// other server's origin, not its path or the key; the other server receives
// nothing, and no caption is written.
func TestProviderRedirectNotFollowed(t *testing.T) {
	const key = "sk-rdrtst-0123456789abcdefXYZ"
	t.Setenv("REDIRECT_TEST_KEY", key)
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"stolen"}}]}`)
	}))
	t.Cleanup(other.Close)
	var redirected atomic.Int64
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost { // the completion; a loopback server is also asked GET /props and /metrics, redirected likewise
			redirected.Add(1)
		}
		http.Redirect(w, r, other.URL+r.URL.Path+"?sig=abc", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(origin.Close)

	s := newSource(t)
	s.exec(t, `INSERT INTO pgimageai.models (name, provider, base_url, model, api_key_env, options) VALUES ('moved', 'openai', $1, 'gpt-test', 'REDIRECT_TEST_KEY', '{"max_retries": 0}')`, origin.URL+"/v1")
	s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('moved', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'moved', 'Describe', 'public.out', 'caption')`)
	s.start(t, s.config(t))
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (1, $1)", pngImage(t, 1))
	s.sync(t, 30*time.Second)

	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the redirect's target received %d requests", n)
	}
	var reason, detail string
	if err := s.conn.QueryRow(context.Background(), `SELECT reason, detail FROM pgimageai.errors WHERE rule = 'moved' AND resolved_at IS NULL`).Scan(&reason, &detail); err != nil {
		t.Fatalf("errors row: %v", err)
	}
	want := "HTTP 307: the provider redirected to " + other.URL + ";"
	if reason != "provider_error" || !strings.Contains(detail, want) || strings.Contains(detail, "sig=") || strings.Contains(detail, key[:12]) {
		t.Errorf("errors row %s %q, want provider_error containing %q, without the Location's query or the key", reason, detail, want)
	}
	if n := redirected.Load(); n != 1 {
		t.Errorf("the model's server received %d requests, want 1 POST (a redirect is not retried)", n)
	}
	var caption *string
	if err := s.conn.QueryRow(context.Background(), "SELECT caption FROM public.out WHERE id = 1").Scan(&caption); err == nil && caption != nil {
		t.Errorf("caption %q written from the redirect's target", *caption)
	}
}
