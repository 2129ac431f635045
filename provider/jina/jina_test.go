package jina

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/internal/fakeapi"
)

var pngImage = fakeapi.PNG

const pngBase64 = "iVBORw0KGgoAAAAN"

var spec = fakeapi.Spec{
	Provider: "jina",
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
			out = append(out, fakeapi.String(fakeapi.Map(in)["image"]))
		}
		return out
	},
	Echo:    fakeapi.OpenAIEcho,
	Payload: func(img provider.Image) string { return base64.StdEncoding.EncodeToString(img.Data) },
	ErrorBody: func(msg string) string {
		b, _ := json.Marshal(map[string]any{"detail": msg})
		return string(b)
	},
	MaxBatchSize: MaxBatchSize,
}

func TestSuite(t *testing.T) { fakeapi.Suite(t, spec) }

// recorded is the shape of a Jina answer as in Jina's own examples
// (https://jina.ai/embeddings, "API" tab): usage holds total_tokens only.
// Shortened to three dimensions.
const recorded = `{"model":"jina-embeddings-v4","object":"list","usage":{"total_tokens":4000},
 "data":[{"object":"embedding","index":0,"embedding":[0.01,-0.02,0.03]}]}`

// TestRequestAndAnswer checks the body against Jina's embeddings API
// (https://api.jina.ai/redoc, POST /v1/embeddings: model, input with
// {"image": base64} items, task, dimensions, normalized).
func TestRequestAndAnswer(t *testing.T) {
	tests := []struct {
		name     string
		options  string
		wantBody string
	}{
		{name: "defaults", options: `{"batch_size":1}`,
			wantBody: `{"model":"jina-embeddings-v4","input":[{"image":"` + pngBase64 + `"}]}`},
		{name: "task, dimensions, normalized", options: `{"batch_size":1,"task":"retrieval.passage","dimensions":3,"normalized":true}`,
			wantBody: `{"model":"jina-embeddings-v4","input":[{"image":"` + pngBase64 + `"}],"task":"retrieval.passage","dimensions":3,"normalized":true}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := spec.NewServer(t, fakeapi.Answer{Status: 200, Body: recorded})
			m := provider.Model{BaseURL: srv.URL + "/v1", Model: "jina-embeddings-v4", APIKeyEnv: "JINA_API_KEY",
				Options: json.RawMessage(tt.options)}
			p, err := New(m, fakeapi.Env(map[string]string{"JINA_API_KEY": "jina_key"}))
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.EmbedImage(context.Background(), pngImage)
			if err != nil || !slices.Equal(got.Vector, []float32{0.01, -0.02, 0.03}) || got.Usage.PromptTokens != 4000 {
				t.Fatalf("EmbedImage = %+v, %v", got, err)
			}
			r := srv.Requests()[0]
			if r.Path != "/v1/embeddings" || r.Header.Get("Authorization") != "Bearer jina_key" {
				t.Fatalf("path %s, auth %q", r.Path, r.Header.Get("Authorization"))
			}
			fakeapi.EqualJSON(t, r.Body, r.Raw, tt.wantBody)
		})
	}
}

func TestDefaults(t *testing.T) {
	p, err := New(provider.Model{Model: "jina-clip-v2"}, nil)
	if err != nil || p.URL != "https://api.jina.ai/v1/embeddings" || p.cfg.BatchSize != DefaultBatchSize {
		t.Fatalf("New = %+v, %v", p, err)
	}
	for _, opts := range []string{`{"batch_size":513}`, `{"task":"retrieval"}`, `{"normalized":"yes"}`} {
		if _, err := ParseConfig(json.RawMessage(opts)); err == nil {
			t.Errorf("%s accepted", opts)
		}
	}
}

func BenchmarkRequestsPerRow(b *testing.B) {
	b.Run("batch_size=1", func(b *testing.B) { fakeapi.BenchmarkRequestsPerRow(b, spec, 256, 1) })
	b.Run("batch_size=32", func(b *testing.B) { fakeapi.BenchmarkRequestsPerRow(b, spec, 256, 32) })
}
