package integration_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/provider/vllm"
)

// vllmVector is the fake vLLM's vector for an image: three values in [0, 1)
// taken from the SHA-256 of its bytes.
func vllmVector(img []byte) [3]float32 {
	sum := sha256.Sum256(img)
	var v [3]float32
	for i := range v {
		v[i] = float32(binary.BigEndian.Uint16(sum[2*i:])) / 65536
	}
	return v
}

// newFakeVLLM serves POST /v1/embeddings the way vLLM does for a chat-style
// embedding request of model vlm2vec, checking the request's shape, with
// vllmVector's three values.
func newFakeVLLM(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	return newFakeEmbedder(t, "vlm2vec", func(img []byte) []float32 { v := vllmVector(img); return v[:] })
}

// newFakeEmbedder serves vLLM's POST /v1/embeddings for chat-style image
// input (vLLM's OpenAI-compatible server, "Embeddings API" with messages:
// docs.vllm.ai/en/latest/serving/openai_compatible_server.html) for model,
// checking the request's shape, with the vector vec gives the image.
func newFakeEmbedder(t testing.TB, model string, vec func(img []byte) []float32) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role    string `json:"role"`
				Content []struct {
					Type     string `json:"type"`
					ImageURL struct {
						URL string `json:"url"`
					} `json:"image_url"`
				} `json:"content"`
			} `json:"messages"`
			EncodingFormat string `json:"encoding_format"`
		}
		if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
			http.Error(w, `{"object":"error","message":"not found"}`, http.StatusNotFound)
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model != model || req.EncodingFormat != "float" ||
			len(req.Messages) != 1 || req.Messages[0].Role != "user" || len(req.Messages[0].Content) != 1 ||
			req.Messages[0].Content[0].Type != "image_url" {
			t.Errorf("unexpected request %+v (%v)", req, err)
			http.Error(w, `{"object":"error","message":"bad request"}`, http.StatusBadRequest)
			return
		}
		url := req.Messages[0].Content[0].ImageURL.URL
		_, b64, ok := strings.Cut(url, ";base64,")
		img, err := base64.StdEncoding.DecodeString(b64)
		if !ok || !strings.HasPrefix(url, "data:image/") || err != nil {
			t.Errorf("image_url %.40q is not a data URL (%v)", url, err)
			http.Error(w, `{"object":"error","message":"bad image"}`, http.StatusBadRequest)
			return
		}
		out, _ := json.Marshal(map[string]any{"id": "embd-1", "object": "list", "created": 1, "model": model,
			"data":  []any{map[string]any{"index": 0, "object": "embedding", "embedding": vec(img)}},
			"usage": map[string]any{"prompt_tokens": 42, "total_tokens": 42, "completion_tokens": 0}})
		w.Header().Set("Content-Type", "application/json")
		w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// TestEmbedVLLMNearestNeighbour embeds images through the vllm provider into
// a pgvector column and finds one of them by a nearby query vector.
func TestEmbedVLLMNearestNeighbour(t *testing.T) {
	ai, calls := newFakeVLLM(t)
	s := newSource(t)
	s.exec(t, "CREATE EXTENSION IF NOT EXISTS vector")
	s.exec(t, "CREATE TABLE public.vecs (id int PRIMARY KEY, v vector(3))")
	s.exec(t, `INSERT INTO pgimageai.models (name, provider, base_url, model, options) VALUES ('vlm', 'vllm', $1, 'vlm2vec', '{"dimensions":3}')`,
		ai.URL+"/v1")
	s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('vec', 'public.photos', 'img', 'AI_IMAGE_EMBED', 'vlm', NULL, 'public.vecs', 'v')`)
	cfg := s.config(t)
	cfg.Registry.Register("vllm", vllm.Factory)
	s.start(t, cfg)

	images := map[int][]byte{1: pngImage(t, 1), 2: jpegImage(t, 2), 3: pngImage(t, 3), 4: gifImage(t, 4, false), 5: jpegImage(t, 5)}
	for id, img := range images {
		s.exec(t, "INSERT INTO public.photos (id, img) VALUES ($1, $2)", id, img)
	}
	s.sync(t, 30*time.Second)

	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.vecs WHERE v IS NOT NULL"); n != len(images) {
		t.Fatalf("vectors written = %d, want %d (provider calls: %d)", n, len(images), calls.Load())
	}
	for id, img := range images {
		want := vllmVector(img)
		var got string
		if err := s.conn.QueryRow(context.Background(), "SELECT v::text FROM public.vecs WHERE id = $1", id).Scan(&got); err != nil {
			t.Fatal(err)
		}
		var vals []float32
		if err := json.Unmarshal([]byte(got), &vals); err != nil || len(vals) != 3 || vals[0] != want[0] || vals[1] != want[1] || vals[2] != want[2] {
			t.Fatalf("row %d: v = %s, want %v", id, got, want)
		}
	}

	v := vllmVector(images[3])
	query := fmt.Sprintf("[%g,%g,%g]", v[0]+0.001, v[1]-0.001, v[2])
	if id := queryInt(t, s.conn, "SELECT id FROM public.vecs ORDER BY v <-> $1::vector LIMIT 1", query); id != 3 {
		t.Fatalf("nearest neighbour of %s = row %d, want 3", query, id)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE rule = 'vec'"); n != 0 {
		t.Fatalf("errors rows = %d, want 0", n)
	}
}
