package voyage

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/internal/fakeapi"
)

var (
	pngImage  = fakeapi.PNG
	pngURL    = fakeapi.PNGURL
	jpegImage = provider.Image{Data: []byte{0xFF, 0xD8, 0xFF, 0xE0}, MIME: "image/jpeg"}
	jpegURL   = "data:image/jpeg;base64,/9j/4A=="
)

var spec = fakeapi.Spec{
	Provider: "voyage",
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
	Path:   "/v1/multimodalembeddings",
	Inputs: func(body map[string]any) []string {
		var out []string
		for _, in := range fakeapi.Slice(body["inputs"]) {
			for _, part := range fakeapi.Slice(fakeapi.Map(in)["content"]) {
				out = append(out, fakeapi.String(fakeapi.Map(part)["image_base64"]))
			}
		}
		return out
	},
	Echo: func(vecs [][]float32, tokens int) string {
		type item struct {
			Object    string    `json:"object"`
			Embedding []float32 `json:"embedding"`
			Index     int       `json:"index"`
		}
		a := struct {
			Object string         `json:"object"`
			Data   []item         `json:"data"`
			Model  string         `json:"model"`
			Usage  map[string]int `json:"usage"`
		}{Object: "list", Data: []item{}, Model: "voyage-multimodal-3",
			Usage: map[string]int{"text_tokens": 0, "image_pixels": 1000 * len(vecs), "total_tokens": tokens}}
		for i, v := range vecs {
			a.Data = append(a.Data, item{Object: "embedding", Embedding: v, Index: i})
		}
		b, _ := json.Marshal(a)
		return string(b)
	},
	Payload: func(img provider.Image) string {
		f, _ := magic.ParseMIME(img.MIME)
		return magic.DataURL(f, img.Data)
	},
	ErrorBody: func(msg string) string {
		b, _ := json.Marshal(map[string]any{"detail": msg})
		return string(b)
	},
	MaxBatchSize: MaxBatchSize,
}

func TestSuite(t *testing.T) { fakeapi.Suite(t, spec) }

// recorded is the shape of a Voyage answer for two images, out of order,
// shortened to three dimensions.
const recorded = `{"object":"list","data":[
 {"object":"embedding","embedding":[0.4,0.5,0.6],"index":1},
 {"object":"embedding","embedding":[0.1,0.2,0.3],"index":0}],
 "model":"voyage-multimodal-3","usage":{"text_tokens":0,"image_pixels":2000000,"total_tokens":7143}}`

// TestRequestAndAnswer checks the body against Voyage's multimodal
// embeddings API (https://docs.voyageai.com/reference/multimodal-embeddings-api:
// inputs of content lists, an image as {"type":"image_base64",
// "image_base64":DATA_URL}, input_type "document"; usage.total_tokens).
func TestRequestAndAnswer(t *testing.T) {
	srv := spec.NewServer(t, fakeapi.Answer{Status: 200, Body: recorded})
	m := provider.Model{BaseURL: srv.URL + "/v1", Model: "voyage-multimodal-3", APIKeyEnv: "VOYAGE_API_KEY",
		Options: json.RawMessage(`{"dimensions":3,"batch_size":2,"batch_wait":"5s"}`)}
	p, err := New(m, fakeapi.Env(map[string]string{"VOYAGE_API_KEY": "pa-key"}))
	if err != nil {
		t.Fatal(err)
	}
	var got [2]provider.Embedding
	done := make(chan struct{})
	go func() {
		defer close(done)
		got[1], _ = p.EmbedImage(context.Background(), jpegImage)
	}()
	time.Sleep(50 * time.Millisecond) // the png goes second
	got[0], err = p.EmbedImage(context.Background(), pngImage)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	r := srv.Requests()
	if len(r) != 1 || r[0].Path != "/v1/multimodalembeddings" || r[0].Header.Get("Authorization") != "Bearer pa-key" {
		t.Fatalf("requests %d, path %s, auth %q", len(r), r[0].Path, r[0].Header.Get("Authorization"))
	}
	fakeapi.EqualJSON(t, r[0].Body, r[0].Raw, `{"model":"voyage-multimodal-3","input_type":"document","inputs":[
 {"content":[{"type":"image_base64","image_base64":"`+jpegURL+`"}]},
 {"content":[{"type":"image_base64","image_base64":"`+pngURL+`"}]}]}`)
	// The jpeg is input 0 and gets index 0's vector though it comes second.
	if !slices.Equal(got[1].Vector, []float32{0.1, 0.2, 0.3}) || !slices.Equal(got[0].Vector, []float32{0.4, 0.5, 0.6}) {
		t.Fatalf("vectors = %v", got)
	}
	if got[0].Usage.PromptTokens+got[1].Usage.PromptTokens != 7143 {
		t.Fatalf("usage = %+v, %+v; want shares of 7143", got[0].Usage, got[1].Usage)
	}
}

func TestDefaults(t *testing.T) {
	p, err := New(provider.Model{Model: "voyage-multimodal-3"}, nil)
	if err != nil || p.URL != "https://api.voyageai.com/v1/multimodalembeddings" || p.cfg.BatchSize != DefaultBatchSize {
		t.Fatalf("New = %+v, %v", p, err)
	}
}

func BenchmarkRequestsPerRow(b *testing.B) {
	b.Run("batch_size=1", func(b *testing.B) { fakeapi.BenchmarkRequestsPerRow(b, spec, 256, 1) })
	b.Run("batch_size=32", func(b *testing.B) { fakeapi.BenchmarkRequestsPerRow(b, spec, 256, 32) })
}
