package vllm

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/internal/fakeapi"
)

// pngImage is a byte-exact fixture whose data URL is written out below.
var (
	pngImage = fakeapi.PNG
	pngURL   = fakeapi.PNGURL
)

// recorded is the shape of a vLLM 0.9 answer to a chat-style embedding
// request (VLM2Vec), shortened to three dimensions.
const recorded = `{"id":"embd-5f0c","object":"list","created":1745000000,"model":"TIGER-Lab/VLM2Vec-Full",
 "data":[{"index":0,"object":"embedding","embedding":[0.0123,-0.5,0.25]}],
 "usage":{"prompt_tokens":767,"total_tokens":767,"completion_tokens":0,"prompt_tokens_details":null}}`

var spec = fakeapi.Spec{
	Provider: "vllm",
	Factory:  Factory,
	New: func(m provider.Model, env provider.Env, sleep func(context.Context, time.Duration) error) (provider.Embedder, error) {
		p, err := New(m, env)
		if err != nil {
			return nil, err
		}
		p.client.Retrier.Sleep = sleep
		return p, nil
	},
	Suffix: "/v1",
	Path:   "/v1/embeddings",
	Inputs: func(body map[string]any) []string {
		var out []string
		for _, m := range fakeapi.Slice(body["messages"]) {
			for _, part := range fakeapi.Slice(fakeapi.Map(m)["content"]) {
				if u := fakeapi.String(fakeapi.Map(fakeapi.Map(part)["image_url"])["url"]); u != "" {
					out = append(out, u)
				}
			}
		}
		return out
	},
	Echo: func(vecs [][]float32, tokens int) string {
		type item struct {
			Index     int       `json:"index"`
			Object    string    `json:"object"`
			Embedding []float32 `json:"embedding"`
		}
		a := struct {
			Object string         `json:"object"`
			Data   []item         `json:"data"`
			Usage  map[string]int `json:"usage"`
		}{Object: "list", Data: []item{}, Usage: map[string]int{"prompt_tokens": tokens, "total_tokens": tokens}}
		for i, v := range vecs {
			a.Data = append(a.Data, item{Index: i, Object: "embedding", Embedding: v})
		}
		b, _ := json.Marshal(a)
		return string(b)
	},
	Payload: func(img provider.Image) string {
		f, _ := magic.ParseMIME(img.MIME)
		return magic.DataURL(f, img.Data)
	},
	ErrorBody: func(msg string) string {
		b, _ := json.Marshal(map[string]any{"object": "error", "message": msg, "type": "BadRequestError", "param": nil, "code": 400})
		return string(b)
	},
}

func TestSuite(t *testing.T) { fakeapi.Suite(t, spec) }

// TestRequestAndAnswer checks the body against vLLM's EmbeddingChatRequest
// (vllm/entrypoints/openai/protocol.py) and its VLM2Vec example
// (examples/online_serving/openai_chat_embedding_client_for_multimodal.py).
func TestRequestAndAnswer(t *testing.T) {
	tests := []struct {
		name     string
		options  string
		keyEnv   string
		wantBody string
		wantAuth string
	}{
		{name: "defaults", options: `{}`, wantBody: `{"model":"TIGER-Lab/VLM2Vec-Full",
 "messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"` + pngURL + `"}}]}],
 "encoding_format":"float"}`},
		{name: "dimensions sent and checked; key as Bearer", options: `{"dimensions":3}`, keyEnv: "VLLM_KEY",
			wantAuth: "Bearer token-abc", wantBody: `{"model":"TIGER-Lab/VLM2Vec-Full",
 "messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"` + pngURL + `"}}]}],
 "encoding_format":"float","dimensions":3}`},
		{name: "VLM2Vec text part after the image", options: `{"text":"Represent the given image."}`, wantBody: `{"model":"TIGER-Lab/VLM2Vec-Full",
 "messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"` + pngURL + `"}},
  {"type":"text","text":"Represent the given image."}]}],
 "encoding_format":"float"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := spec.NewServer(t, fakeapi.Answer{Status: 200, Body: recorded})
			m := provider.Model{Name: "emb", Provider: "vllm", BaseURL: srv.URL + "/v1/", Model: "TIGER-Lab/VLM2Vec-Full",
				APIKeyEnv: tt.keyEnv, Options: json.RawMessage(tt.options)}
			p, err := New(m, fakeapi.Env(map[string]string{"VLLM_KEY": "token-abc"}))
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.EmbedImage(context.Background(), pngImage)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Vector, []float32{0.0123, -0.5, 0.25}) || got.Usage != (provider.Usage{PromptTokens: 767}) {
				t.Fatalf("EmbedImage = %+v", got)
			}
			r := srv.Requests()[0]
			if r.Path != "/v1/embeddings" || r.Header.Get("Authorization") != tt.wantAuth {
				t.Fatalf("path %s, Authorization %q; want /v1/embeddings, %q", r.Path, r.Header.Get("Authorization"), tt.wantAuth)
			}
			var want map[string]any
			if err := json.Unmarshal([]byte(tt.wantBody), &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(r.Body, want) {
				t.Fatalf("body = %s\nwant %s", r.Raw, tt.wantBody)
			}
		})
	}
}

func TestBaseURLRequired(t *testing.T) {
	if _, err := New(provider.Model{Model: "x"}, nil); err == nil {
		t.Fatal("New without base_url succeeded")
	}
}
