package cohere

import (
	"context"
	"encoding/json"
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
	Provider: "cohere",
	Factory:  Factory,
	New: func(m provider.Model, env provider.Env, sleep func(context.Context, time.Duration) error) (provider.Embedder, error) {
		p, err := New(m, env)
		if err != nil {
			return nil, err
		}
		p.Client.Retrier.Sleep = sleep
		return p, nil
	},
	Suffix: "",
	Path:   "/v2/embed",
	Inputs: func(body map[string]any) []string {
		var out []string
		for _, in := range fakeapi.Slice(body["inputs"]) {
			for _, part := range fakeapi.Slice(fakeapi.Map(in)["content"]) {
				out = append(out, fakeapi.String(fakeapi.Map(fakeapi.Map(part)["image_url"])["url"]))
			}
		}
		return out
	},
	Echo: func(vecs [][]float32, tokens int) string {
		if vecs == nil {
			vecs = [][]float32{}
		}
		b, _ := json.Marshal(map[string]any{
			"id":         "da6e531f-54c6-4a73-bf92-f60566d8d753",
			"embeddings": map[string]any{"float": vecs},
			"texts":      []string{},
			"meta": map[string]any{"api_version": map[string]any{"version": "2"},
				"billed_units": map[string]any{"input_tokens": tokens, "images": len(vecs)}},
			"response_type": "embeddings_by_type",
		})
		return string(b)
	},
	Payload: func(img provider.Image) string {
		f, _ := magic.ParseMIME(img.MIME)
		return magic.DataURL(f, img.Data)
	},
	ErrorBody: func(msg string) string {
		b, _ := json.Marshal(map[string]any{"id": "x", "message": msg})
		return string(b)
	},
	MaxBatchSize: MaxBatchSize,
}

func TestSuite(t *testing.T) { fakeapi.Suite(t, spec) }

// recorded is the shape of a Cohere v2 embed answer, shortened to three
// dimensions; billed units are floats (cohere-python
// src/cohere/types/api_meta_billed_units.py: Optional[float]).
const recorded = `{"id":"5807ee2e-0cda-445a-9ec8-864c60a06606","embeddings":{"float":[[0.016296387,-0.008354187,-0.04699707]]},
 "texts":[],"images":[{"width":400,"height":400,"format":"png","bit_depth":24}],
 "meta":{"api_version":{"version":"2"},"billed_units":{"input_tokens":1.0,"image_tokens":1023.0,"images":1.0}},"response_type":"embeddings_by_type"}`

// TestRequestAndAnswer checks the body against cohere-python's v2 embed
// (src/cohere/v2/client.py) with content parts of
// src/cohere/types/embed_content.py: ImageUrlEmbedContent is
// {"type":"image_url","image_url":EmbedImageUrl{"url":…}}.
func TestRequestAndAnswer(t *testing.T) {
	tests := []struct {
		name     string
		options  string
		wantBody string
	}{
		{name: "defaults", options: `{"batch_size":1}`, wantBody: `{"model":"embed-v4.0","input_type":"search_document",
 "embedding_types":["float"],"inputs":[{"content":[{"type":"image_url","image_url":{"url":"` + pngURL + `"}}]}]}`},
		{name: "input_type", options: `{"batch_size":1,"input_type":"clustering"}`,
			wantBody: `{"model":"embed-v4.0","input_type":"clustering",
 "embedding_types":["float"],"inputs":[{"content":[{"type":"image_url","image_url":{"url":"` + pngURL + `"}}]}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := spec.NewServer(t, fakeapi.Answer{Status: 200, Body: recorded})
			m := provider.Model{BaseURL: srv.URL + "/", Model: "embed-v4.0", APIKeyEnv: "CO_API_KEY", Options: json.RawMessage(tt.options)}
			p, err := New(m, fakeapi.Env(map[string]string{"CO_API_KEY": "co-key"}))
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.EmbedImage(context.Background(), pngImage)
			if err != nil || !slices.Equal(got.Vector, []float32{0.016296387, -0.008354187, -0.04699707}) || got.Usage.PromptTokens != 1024 {
				t.Fatalf("EmbedImage = %+v, %v", got, err)
			}
			r := srv.Requests()[0]
			if r.Path != "/v2/embed" || r.Header.Get("Authorization") != "Bearer co-key" {
				t.Fatalf("path %s, auth %q", r.Path, r.Header.Get("Authorization"))
			}
			fakeapi.EqualJSON(t, r.Body, r.Raw, tt.wantBody)
		})
	}
}

func TestDefaults(t *testing.T) {
	p, err := New(provider.Model{Model: "embed-v4.0"}, nil)
	if err != nil || p.URL != "https://api.cohere.com/v2/embed" || p.cfg.BatchSize != DefaultBatchSize || p.cfg.InputType != "search_document" {
		t.Fatalf("New = %+v, %v", p, err)
	}
	for _, opts := range []string{`{"input_type":"query"}`, `{"input_type":"image"}`} {
		if _, err := ParseConfig(json.RawMessage(opts)); err == nil {
			t.Errorf("%s accepted", opts)
		}
	}
	if c, err := ParseConfig(json.RawMessage(`{"dimensions":1024}`)); err != nil || c.Dimensions != 1024 {
		t.Errorf("dimensions 1024: %+v, %v", c, err)
	}
	if _, err := New(provider.Model{Model: "embed-english-v3.0"}, nil); err == nil || !strings.Contains(err.Error(), "embed-v4.0") {
		t.Errorf("embed-english-v3.0: err = %v, want one naming embed-v4.0", err)
	}
}

func TestDimensionsSentAsOutputDimension(t *testing.T) {
	srv := spec.NewServer(t)
	p, err := New(provider.Model{BaseURL: srv.URL, Model: "embed-v4.0", Options: json.RawMessage(`{"batch_size":1,"dimensions":256,"max_retries":0}`)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The echo's 3 values are not 256: a bad_response, after the request
	// that carried output_dimension.
	if _, err := p.EmbedImage(context.Background(), pngImage); err == nil || !strings.Contains(err.Error(), "want 256") {
		t.Fatalf("err = %v", err)
	}
	if got := srv.Requests()[0].Body["output_dimension"]; got != float64(256) {
		t.Fatalf("output_dimension = %v, want 256", got)
	}
}

func BenchmarkRequestsPerRow(b *testing.B) {
	b.Run("batch_size=1", func(b *testing.B) { fakeapi.BenchmarkRequestsPerRow(b, spec, 256, 1) })
	b.Run("batch_size=32", func(b *testing.B) { fakeapi.BenchmarkRequestsPerRow(b, spec, 256, 32) })
}
