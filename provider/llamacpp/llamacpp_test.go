package llamacpp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/internal/fakeapi"
)

var (
	pngImage = fakeapi.PNG
	pngURL   = fakeapi.PNGURL
)

var spec = fakeapi.Spec{
	Provider: "llamacpp",
	Factory:  Factory,
	New: func(m provider.Model, env provider.Env, sleep func(context.Context, time.Duration) error) (provider.Embedder, error) {
		p, err := New(m, env)
		if err != nil {
			return nil, err
		}
		p.Client.Retrier.Sleep = sleep
		p.shape = ShapeContent // no GET /props: the suite counts POSTs
		return p, nil
	},
	Suffix: "/v1",
	Path:   "/v1/embeddings",
	Inputs: func(body map[string]any) []string {
		var out []string
		for _, in := range fakeapi.Slice(body["input"]) {
			for _, part := range fakeapi.Slice(fakeapi.Map(in)["content"]) {
				if u := fakeapi.String(fakeapi.Map(fakeapi.Map(part)["image_url"])["url"]); u != "" {
					out = append(out, u)
				}
			}
		}
		return out
	},
	Echo: fakeapi.OpenAIEcho,
	Payload: func(img provider.Image) string {
		f, _ := magic.ParseMIME(img.MIME)
		return magic.DataURL(f, img.Data)
	},
	ErrorBody: func(msg string) string {
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": 400, "message": msg, "type": "invalid_request_error"}})
		return string(b)
	},
	MaxBatchSize: MaxBatchSize,
}

func TestSuite(t *testing.T) { fakeapi.Suite(t, spec) }

func TestRequestAndAnswer(t *testing.T) {
	tests := []struct {
		name       string
		answer     string
		wantVector []float32
		wantTokens int
		wantErr    string
	}{
		{name: "OpenAI-style answer (/v1/embeddings)",
			answer: `{"model":"gme-qwen2-vl","object":"list","usage":{"prompt_tokens":258,"total_tokens":258},
 "data":[{"embedding":[0.5,0.25,-1],"index":0,"object":"embedding"}]}`,
			wantVector: []float32{0.5, 0.25, -1}, wantTokens: 258},
		{name: "native answer, pooled (/embeddings)",
			answer:     `[{"index":0,"embedding":[[0.5,0.25,-1]]}]`,
			wantVector: []float32{0.5, 0.25, -1}},
		{name: "native answer, per-token vectors",
			answer:  `[{"index":0,"embedding":[[0.5,0.25,-1],[1,2,3]]}]`,
			wantErr: "--pooling"},
		{name: "empty inner vector", answer: `[{"index":0,"embedding":[[]]}]`, wantErr: "empty embedding"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := spec.NewServer(t, fakeapi.Answer{Status: 200, Body: tt.answer})
			p, err := New(provider.Model{BaseURL: srv.URL, Model: "gme-qwen2-vl", Options: json.RawMessage(`{"batch_size":1,"request_shape":"content"}`)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.EmbedImage(context.Background(), pngImage)
			r := srv.Requests()[0]
			if r.Path != "/embeddings" {
				t.Errorf("path = %s", r.Path)
			}
			// tools/server/README.md, POST /v1/embeddings: "each element of input
			// can also be an object with a content array, using the same parts
			// as /v1/chat/completions"; the text part keeps the prompt from
			// ending with the image (see DefaultText).
			fakeapi.EqualJSON(t, r.Body, r.Raw, `{"model":"gme-qwen2-vl",
 "input":[{"content":[{"type":"image_url","image_url":{"url":"`+pngURL+`"}},{"type":"text","text":"\n"}]}]}`)
			if tt.wantErr != "" {
				var pe *provider.Error
				if !errors.As(err, &pe) || pe.Kind != provider.BadResponse || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want a bad response containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got.Vector, tt.wantVector) || got.Usage.PromptTokens != tt.wantTokens {
				t.Fatalf("EmbedImage = %+v, %v", got, err)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	c, err := ParseConfig(nil)
	if err != nil || c.BatchSize != DefaultBatchSize || time.Duration(c.BatchWait) != 20*time.Millisecond || c.Text != "\n" || c.RequestShape != ShapeAuto {
		t.Fatalf("ParseConfig(nil) = %+v, %v", c, err)
	}
	// stb_image, llama.cpp's decoder, reads no WebP.
	if c.Allows(magic.WebP) || !c.Allows(magic.PNG) || !c.Allows(magic.JPEG) || !c.Allows(magic.GIF) {
		t.Fatalf("default formats = %v, want PNG, JPEG, GIF", c.Formats)
	}
	if c, err := ParseConfig(json.RawMessage(`{"formats":["image/webp"]}`)); err != nil || !c.Allows(magic.WebP) || c.Allows(magic.PNG) {
		t.Fatalf("formats webp only = %+v, %v", c.Formats, err)
	}
	if _, err := ParseConfig(json.RawMessage(`{"request_shape":"prompt"}`)); err == nil || !strings.Contains(err.Error(), "request_shape") {
		t.Fatalf("request_shape prompt: err = %v", err)
	}
	if _, err := New(provider.Model{Model: "x"}, nil); err == nil {
		t.Fatal("New without base_url succeeded")
	}
}

func BenchmarkRequestsPerRow(b *testing.B) {
	b.Run("batch_size=1", func(b *testing.B) { fakeapi.BenchmarkRequestsPerRow(b, spec, 256, 1) })
	b.Run("batch_size=32", func(b *testing.B) { fakeapi.BenchmarkRequestsPerRow(b, spec, 256, 32) })
}

// TestRequestShapeFromProps follows tools/server/README.md: GET /props
// answers media_marker (random per start since PR #21962); a JSON prompt
// {"prompt_string","multimodal_data"} carries the raw base64 in place of
// the marker (POST /completion, "A JSON object which optionally contains
// multimodal data"), which /embeddings takes too.
func TestRequestShapeFromProps(t *testing.T) {
	const marker = "<__media_P8PiO4bGVfiCKfAPG1rsSNqqXKCSQD7N__>"
	tests := []struct {
		name       string
		options    string
		props      fakeapi.Answer
		wantProps  bool
		wantInput  string
		wantShape2 string // the shape of a second request
	}{
		{name: "media_marker", options: `{"batch_size":1}`, props: fakeapi.Answer{Status: 200, Body: `{"media_marker":"` + marker + `","build_info":"b11669-Debian"}`},
			wantProps: true, wantInput: `{"prompt_string":"` + marker + `\n","multimodal_data":["iVBORw0KGgoAAAAN"]}`},
		{name: "no media_marker: the literal marker", options: `{"batch_size":1}`, props: fakeapi.Answer{Status: 200, Body: `{"build_info":"b6100"}`},
			wantProps: true, wantInput: `{"prompt_string":"<__media__>\n","multimodal_data":["iVBORw0KGgoAAAAN"]}`},
		{name: "no /props: content", options: `{"batch_size":1}`, props: fakeapi.Answer{Status: 404, Body: `{"error":{"code":404,"message":"File Not Found"}}`},
			wantProps: true, wantInput: `{"content":[{"type":"image_url","image_url":{"url":"` + pngURL + `"}},{"type":"text","text":"\n"}]}`},
		{name: "option multimodal_data, own text", options: `{"batch_size":1,"request_shape":"multimodal_data","text":" Represent the image."}`,
			wantInput: `{"prompt_string":"<__media__> Represent the image.","multimodal_data":["iVBORw0KGgoAAAAN"]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			script := []fakeapi.Answer{{}, {}}
			if tt.wantProps {
				script = []fakeapi.Answer{tt.props, {}, {}}
			}
			srv := spec.NewServer(t, script...)
			srv.Inputs = func(map[string]any) []string { return []string{"x"} }
			p, err := New(provider.Model{BaseURL: srv.URL + "/v1", Model: "m", Options: json.RawMessage(tt.options)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if _, err := p.EmbedImage(context.Background(), pngImage); err != nil {
					t.Fatal(err)
				}
			}
			reqs := srv.Requests()
			if tt.wantProps {
				if reqs[0].Method != "GET" || reqs[0].Path != "/props" {
					t.Fatalf("first request %s %s, want GET /props", reqs[0].Method, reqs[0].Path)
				}
				reqs = reqs[1:]
			}
			if len(reqs) != 2 {
				t.Fatalf("%d embedding requests, want 2 (/props asked once)", len(reqs))
			}
			for _, r := range reqs {
				if r.Method != "POST" || r.Path != "/v1/embeddings" {
					t.Fatalf("request %s %s", r.Method, r.Path)
				}
				fakeapi.EqualJSON(t, r.Body, r.Raw, `{"model":"m","input":[`+tt.wantInput+`]}`)
			}
		})
	}
}

// TestMarkerOfARestartedServer: llama-server draws a new media_marker at
// every start (PR #21962), and answers a prompt with the old one with HTTP
// 500 "Failed to tokenize prompt" (seen on b11669). The provider asks
// GET /props again and resends with the new marker.
func TestMarkerOfARestartedServer(t *testing.T) {
	var mu sync.Mutex
	marker := "<__media_AAAA__>"
	var props, posts int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet && r.URL.Path == "/props" {
			props++
			fmt.Fprintf(w, `{"media_marker":%q}`, marker)
			return
		}
		posts++
		var req struct {
			Input []multimodalInput `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Input) != 1 || !strings.HasPrefix(req.Input[0].PromptString, marker) {
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, `{"error":{"code":500,"message":"Failed to tokenize prompt","type":"server_error"}}`)
			return
		}
		io.WriteString(w, `{"data":[{"index":0,"embedding":[0.6,0.8]}],"usage":{"prompt_tokens":18}}`)
	}))
	defer srv.Close()
	p, err := New(provider.Model{BaseURL: srv.URL + "/v1", Model: "m", Options: json.RawMessage(`{"batch_size":1,"max_retries":0}`)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.EmbedImage(context.Background(), pngImage); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	marker = "<__media_BBBB__>" // the server restarted
	mu.Unlock()
	got, err := p.EmbedImage(context.Background(), pngImage)
	if err != nil || !slices.Equal(got.Vector, []float32{0.6, 0.8}) {
		t.Fatalf("after the restart: %+v, %v", got, err)
	}
	if props != 2 || posts != 3 {
		t.Fatalf("GET /props %d times, POST %d times; want 2 and 3 (the stale one resent once)", props, posts)
	}
}

// TestConcurrencyStartsFromTotalSlots: GET /props' total_slots (the
// server's --parallel; tools/server/README.md, "GET /props") sets the
// model's concurrency: two requests a slot, within max_concurrency.
func TestConcurrencyStartsFromTotalSlots(t *testing.T) {
	for _, tt := range []struct {
		options string
		slots   int
		want    int
	}{
		{options: `{"batch_size":1}`, slots: 3, want: 6},
		{options: `{"batch_size":1,"max_concurrency":2}`, slots: 3, want: 2},
		{options: `{"batch_size":1,"adaptive_concurrency":false,"max_concurrency":5}`, slots: 3, want: 5},
	} {
		srv := spec.NewServer(t, fakeapi.Answer{Status: 200, Body: fmt.Sprintf(`{"media_marker":"<m>","total_slots":%d}`, tt.slots)}, fakeapi.Answer{})
		srv.Inputs = func(map[string]any) []string { return []string{"x"} }
		p, err := New(provider.Model{BaseURL: srv.URL + "/v1", Model: "m", Options: json.RawMessage(tt.options)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.EmbedImage(context.Background(), pngImage); err != nil {
			t.Fatal(err)
		}
		if got := p.Pace().Limit(); got != tt.want {
			t.Errorf("%s with total_slots %d: limit %d, want %d", tt.options, tt.slots, got, tt.want)
		}
	}
}
