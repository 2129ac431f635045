package llamacpp

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
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
		return p, nil
	},
	Suffix: "/v1",
	Path:   "/v1/embeddings",
	Inputs: func(body map[string]any) []string {
		var out []string
		for _, in := range fakeapi.Slice(body["input"]) {
			for _, part := range fakeapi.Slice(fakeapi.Map(in)["content"]) {
				out = append(out, fakeapi.String(fakeapi.Map(fakeapi.Map(part)["image_url"])["url"]))
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
			p, err := New(provider.Model{BaseURL: srv.URL, Model: "gme-qwen2-vl", Options: json.RawMessage(`{"batch_size":1}`)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.EmbedImage(context.Background(), pngImage)
			r := srv.Requests()[0]
			if r.Path != "/embeddings" {
				t.Errorf("path = %s", r.Path)
			}
			fakeapi.EqualJSON(t, r.Body, r.Raw, `{"model":"gme-qwen2-vl",
 "input":[{"content":[{"type":"image_url","image_url":{"url":"`+pngURL+`"}}]}]}`)
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
	if err != nil || c.BatchSize != DefaultBatchSize || time.Duration(c.BatchWait) != 20*time.Millisecond {
		t.Fatalf("ParseConfig(nil) = %+v, %v", c, err)
	}
	if _, err := New(provider.Model{Model: "x"}, nil); err == nil {
		t.Fatal("New without base_url succeeded")
	}
}

func BenchmarkRequestsPerRow(b *testing.B) {
	b.Run("batch_size=1", func(b *testing.B) { fakeapi.BenchmarkRequestsPerRow(b, spec, 256, 1) })
	b.Run("batch_size=32", func(b *testing.B) { fakeapi.BenchmarkRequestsPerRow(b, spec, 256, 32) })
}
