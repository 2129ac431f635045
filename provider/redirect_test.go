package provider_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/cohere"
	"github.com/pgimageai/pgimageai/provider/internal/fakeapi"
	"github.com/pgimageai/pgimageai/provider/jina"
	"github.com/pgimageai/pgimageai/provider/llamacpp"
	"github.com/pgimageai/pgimageai/provider/openai"
	"github.com/pgimageai/pgimageai/provider/vllm"
	"github.com/pgimageai/pgimageai/provider/voyage"
)

// recorder is an httptest server that answers every request with answer
// and records what it received.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []recorded
}

type recorded struct {
	method, path, auth string
	body               []byte
}

func newRecorder(t *testing.T, answer http.HandlerFunc) *recorder {
	t.Helper()
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.reqs = append(r.reqs, recorded{req.Method, req.URL.Path, req.Header.Get("Authorization"), body})
		r.mu.Unlock()
		answer(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) received() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.reqs...)
}

// call is one request a provider makes with its key.
type call func(ctx context.Context, p provider.Provider) error

func embed(ctx context.Context, p provider.Provider) error {
	_, err := p.(provider.Embedder).EmbedImage(ctx, fakeapi.Image(1))
	return err
}

func caption(ctx context.Context, p provider.Provider) error {
	_, err := p.(provider.TextGenerator).GenerateText(ctx, fakeapi.Image(1), "Describe")
	return err
}

func uploadBatch(ctx context.Context, p provider.Provider) error {
	_, err := p.(provider.BatchAPI).UploadBatch(ctx, "in.jsonl", strings.NewReader(`{"custom_id":"1"}`+"\n"))
	return err
}

func createBatch(ctx context.Context, p provider.Provider) error {
	_, err := p.(provider.BatchAPI).CreateBatch(ctx, "file-1", nil)
	return err
}

// TestNoProviderFollowsRedirects: a provider that answers a redirect — to
// another origin or to itself — is not followed by any provider client: the
// Location receives nothing (no image, no Authorization header), and the call
// fails with a Permanent error (a provider_error row) that names the status
// and the Location's origin, never the key. Go's default client would re-POST
// the image (307, 308) and take the other server's answer as the provider's.
func TestNoProviderFollowsRedirects(t *testing.T) {
	const key = "sk-rdr-0123456789abcdefXYZ"
	providers := []struct {
		name    string
		factory provider.Factory
		suffix  string // appended to the server's URL to form base_url
		options string
		call    call
	}{
		{"openai", openai.Factory, "/v1", `{"max_retries":0}`, caption},
		{"openai batch upload", openai.Factory, "/v1", `{"max_retries":0,"batch_api":true}`, uploadBatch},
		{"openai batch create", openai.Factory, "/v1", `{"max_retries":0,"batch_api":true}`, createBatch},
		{"vllm", vllm.Factory, "/v1", `{"max_retries":0}`, embed},
		{"llamacpp", llamacpp.Factory, "/v1", `{"max_retries":0}`, embed},
		{"cohere", cohere.Factory, "", `{"max_retries":0}`, embed},
		{"voyage", voyage.Factory, "/v1", `{"max_retries":0}`, embed},
		{"jina", jina.Factory, "/v1", `{"max_retries":0}`, embed},
	}
	for _, pv := range providers {
		for _, tt := range []struct {
			name       string
			status     int
			sameOrigin bool
		}{
			{"307 elsewhere", http.StatusTemporaryRedirect, false},
			{"308 elsewhere", http.StatusPermanentRedirect, false},
			{"302 elsewhere", http.StatusFound, false},
			{"301 elsewhere", http.StatusMovedPermanently, false},
			{"303 elsewhere", http.StatusSeeOther, false},
			{"307 to itself", http.StatusTemporaryRedirect, true},
		} {
			t.Run(pv.name+"/"+tt.name, func(t *testing.T) {
				elsewhere := newRecorder(t, func(w http.ResponseWriter, _ *http.Request) {
					io.WriteString(w, `{"data":[{"embedding":[1,2,3]}],"choices":[{"message":{"content":"from elsewhere"}}]}`)
				})
				var origin *recorder
				origin = newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
					to := elsewhere.URL + r.URL.Path
					if tt.sameOrigin {
						if strings.HasPrefix(r.URL.Path, "/moved") {
							io.WriteString(w, `{"choices":[{"message":{"content":"moved"}}]}`)
							return
						}
						to = "/moved" + r.URL.Path + "?token=" + key
					}
					http.Redirect(w, r, to, tt.status)
				})
				m := provider.Model{Name: "m", Provider: pv.name, BaseURL: origin.URL + pv.suffix, Model: "test-model",
					APIKeyEnv: "KEY", Options: json.RawMessage(pv.options)}
				p, err := pv.factory(m, fakeapi.Env(map[string]string{"KEY": key}))
				if err != nil {
					t.Fatal(err)
				}
				err = pv.call(context.Background(), p)

				var pe *provider.Error
				if !errors.As(err, &pe) {
					t.Fatalf("err = %v (%T), want a *provider.Error", err, err)
				}
				wantTo := elsewhere.URL
				if tt.sameOrigin {
					wantTo = origin.URL
				}
				if pe.Kind != provider.Permanent || pe.Status != tt.status || !strings.Contains(pe.Message, "redirected to "+wantTo+";") {
					t.Errorf("error = %v (kind %v, status %d), want a permanent %d naming %s", err, pe.Kind, pe.Status, tt.status, wantTo)
				}
				fakeapi.AssertNoKey(t, err, key)
				if strings.Contains(err.Error(), "token=") {
					t.Errorf("error quotes the Location's query: %v", err)
				}
				if got := elsewhere.received(); len(got) != 0 {
					t.Errorf("the Location received %d requests (first: %s %s, Authorization %q, %d bytes)",
						len(got), got[0].method, got[0].path, got[0].auth, len(got[0].body))
				}
				sent := origin.received()
				for _, r := range sent {
					if strings.HasPrefix(r.path, "/moved") {
						t.Errorf("the redirect to the same origin was followed: %s %s", r.method, r.path)
					}
				}
				// The request that was redirected did go out, with the key and
				// the image: this is the provider's own server.
				if n := len(sent); n == 0 || sent[n-1].auth != "Bearer "+key || sent[n-1].method == http.MethodPost && len(bytes.TrimSpace(sent[n-1].body)) == 0 {
					t.Errorf("the provider's server received %d requests, last %+v", n, sent)
				}
			})
		}
	}
}

// TestRedirected: the error of each kind of answer.
func TestRedirected(t *testing.T) {
	base := &http.Request{URL: mustURL(t, "https://api.example.com/v1/embeddings")}
	tests := []struct {
		name     string
		status   int
		location string
		want     string // "" = not a redirect
	}{
		{"200", 200, "", ""},
		{"400", 400, "https://x.example", ""},
		{"absolute", 307, "http://evil.example:8080/v1/embeddings?key=sk-1", "redirected to http://evil.example:8080;"},
		{"relative", 302, "/elsewhere", "redirected to https://api.example.com;"},
		{"credentials dropped", 308, "https://user:sk-secret@evil.example/x", "redirected to https://evil.example;"},
		{"no location", 300, "", "redirected without a Location;"},
		{"unreadable location", 301, "http://[::1", "redirected to an unreadable Location;"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: tt.status, Header: http.Header{}, Request: base}
			if tt.location != "" {
				resp.Header.Set("Location", tt.location)
			}
			e := provider.Redirected(resp)
			switch {
			case tt.want == "" && e != nil:
				t.Fatalf("Redirected = %v, want nil", e)
			case tt.want == "":
			case e == nil:
				t.Fatalf("Redirected = nil, want %q", tt.want)
			case !strings.Contains(e.Message, tt.want) || e.Kind != provider.Permanent || e.Status != tt.status:
				t.Fatalf("Redirected = %v (kind %v), want permanent %d %q", e, e.Kind, tt.status, tt.want)
			case strings.Contains(e.Message, "sk-"):
				t.Fatalf("Redirected quotes a secret of the Location: %v", e)
			}
		})
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
