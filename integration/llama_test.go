package integration_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/provider/llamacpp"
)

// These tests run against a real llama.cpp llama-server (Debian's llama.cpp-tools, a tiny
// random-weight vision model; see scripts/build-llama-image.sh): its request parsing,
// its image decoder (stb_image: no WebP), its multimodal embeddings and its
// grammar-constrained sampling. A proxy in front of it records what the bridge sent.

// llamaDim is the width of the test model, so the length of its embeddings.
const llamaDim = 64

// proxied is one request that went through the proxy.
type proxied struct {
	method, path string
	body         []byte
}

// llamaProxy forwards to a llama-server and records every request.
type llamaProxy struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []proxied
}

func newLlamaProxy(t *testing.T, l *integration.Llama) *llamaProxy {
	t.Helper()
	target, err := url.Parse(l.URL())
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	p := &llamaProxy{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		p.reqs = append(p.reqs, proxied{method: r.Method, path: r.URL.Path, body: body})
		p.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

// requests returns the recorded requests to path that carry img (in base64).
func (p *llamaProxy) requests(path string, img []byte) []proxied {
	b64 := []byte(base64.StdEncoding.EncodeToString(img))
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []proxied
	for _, r := range p.reqs {
		if r.path == path && (img == nil || bytes.Contains(r.body, b64)) {
			out = append(out, r)
		}
	}
	return out
}

// llamaSource is a source whose bridge knows the openai and llamacpp providers.
func llamaSource(t *testing.T) *source {
	t.Helper()
	s := newSource(t)
	s.exec(t, "CREATE EXTENSION IF NOT EXISTS vector")
	return s
}

func (s *source) startLlama(t *testing.T) {
	t.Helper()
	cfg := s.config(t)
	cfg.Registry.Register("llamacpp", llamacpp.Factory)
	s.start(t, cfg)
}

func (s *source) embedRule(t *testing.T, name, model, target string) {
	t.Helper()
	s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ($1, 'public.photos', 'img', 'AI_IMAGE_EMBED', $2, NULL, $3, 'v')`, name, model, target)
}

// vectorOf reads row id's vector from table (real[] or vector(n)).
func (s *source) vectorOf(t *testing.T, table string, id int) []float64 {
	t.Helper()
	var text *string
	err := s.conn.QueryRow(context.Background(), "SELECT array_to_json(v::real[])::text FROM "+table+" WHERE id = $1", id).Scan(&text)
	if err != nil || text == nil {
		t.Fatalf("%s row %d: no vector (%v)", table, id, err)
	}
	var v []float64
	if err := json.Unmarshal([]byte(*text), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// openError returns the reason and detail of the open errors row of rule for row id.
func (s *source) openError(t *testing.T, rule string, id int) (reason, detail string) {
	t.Helper()
	err := s.conn.QueryRow(context.Background(), `SELECT reason, detail FROM pgimageai.errors
WHERE rule = $1 AND source_key = jsonb_build_object('id', $2::int) AND resolved_at IS NULL`, rule, id).Scan(&reason, &detail)
	if err != nil {
		t.Fatalf("errors row of rule %s, id %d: %v", rule, id, err)
	}
	return reason, detail
}

// realWebP is a real lossy WebP (32×24, made by cwebp), which llama.cpp's decoder
// (stb_image) cannot read.
func realWebP(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("../provider/local/testdata/lossy.webp")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func deref(s *string) string {
	if s == nil {
		return "NULL"
	}
	return *s
}

// cosine is the cosine similarity of two vectors of equal length.
func cosine(a, b []float64) float64 {
	var dot float64
	for i := range a {
		dot += a[i] * b[i]
	}
	return dot / (norm(a) * norm(b))
}

func norm(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x * x
	}
	return math.Sqrt(s)
}

// TestLlamaServerFormats: captions for PNG, JPEG and GIF through the openai provider;
// a WebP is a provider_error (HTTP 400, one request) for an openai model that allows it
// (sent as stored), and is embedded, converted, for a llamacpp model (its default formats
// leave WebP out): no WebP ever reaches /v1/embeddings.
func TestLlamaServerFormats(t *testing.T) {
	px := newLlamaProxy(t, integration.StartLlama(t))
	s := llamaSource(t)
	s.exec(t, `INSERT INTO pgimageai.models (name, provider, base_url, model, options) VALUES
 ('vision', 'openai', $1, 'tiny', '{"max_tokens": 12}'),
 ('emb', 'llamacpp', $2, 'tiny', '{}')`, px.URL+"/v1", px.URL+"/v1")
	s.rule(t, "caption", "vision", "public.captions", "caption")
	s.embedRule(t, "vec", "emb", "public.vecs")
	s.startLlama(t)

	webp := realWebP(t)
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (1, $1), (2, $2), (3, $3), (4, $4)",
		pngImage(t, 1), jpegImage(t, 2), gifImage(t, 3, false), webp)
	s.sync(t, 60*time.Second)

	for id := 1; id <= 4; id++ {
		if v := s.vectorOf(t, "public.vecs", id); len(v) != llamaDim || math.Abs(norm(v)-1) > 1e-3 {
			t.Errorf("vector of row %d: %d values, norm %f; want %d, unit length", id, len(v), norm(v), llamaDim)
		}
		if id == 4 {
			break
		}
		var caption *string
		if err := s.conn.QueryRow(context.Background(), "SELECT caption FROM public.captions WHERE id = $1", id).Scan(&caption); err != nil || caption == nil || *caption == "" {
			t.Errorf("caption of row %d = %v (%v), want the server's text", id, caption, err)
		}
	}
	reason, detail := s.openError(t, "caption", 4)
	if reason != "provider_error" || !strings.Contains(detail, "HTTP 400") || !strings.Contains(detail, "Failed to load image") {
		t.Errorf("caption of the WebP: %s %q, want provider_error with llama-server's HTTP 400", reason, detail)
	}
	if n := len(px.requests("/v1/chat/completions", webp)); n != 1 {
		t.Errorf("the WebP went %d times to /v1/chat/completions, want once (a 400 is not retried)", n)
	}
	if n := len(px.requests("/v1/embeddings", webp)); n != 0 {
		t.Errorf("the WebP went %d times to /v1/embeddings, want never", n)
	}
	var calls, prompt int
	if err := s.conn.QueryRow(context.Background(), `SELECT calls, prompt_tokens FROM pgimageai.usage WHERE rule = 'caption'`).Scan(&calls, &prompt); err != nil || calls != 3 || prompt <= 0 {
		t.Errorf("usage of caption: %d calls, %d prompt tokens (%v); want 3 and the server's count", calls, prompt, err)
	}
}

// TestLlamaServerEmbeddingShapes embeds through both request shapes: multimodal_data with
// the media_marker of GET /props (request_shape unset) into vector(64), and the content
// array into real[]. The same image must give the same unit vector both ways.
func TestLlamaServerEmbeddingShapes(t *testing.T) {
	px := newLlamaProxy(t, integration.StartLlama(t))
	s := llamaSource(t)
	s.exec(t, "CREATE TABLE public.vec_auto (id int PRIMARY KEY, v vector(64))")
	s.exec(t, `INSERT INTO pgimageai.models (name, provider, base_url, model, options) VALUES
 ('auto', 'llamacpp', $1, 'tiny', '{"dimensions": 64}'),
 ('content', 'llamacpp', $1, 'tiny', '{"request_shape": "content"}')`, px.URL+"/v1")
	s.embedRule(t, "v-auto", "auto", "public.vec_auto")
	s.embedRule(t, "v-content", "content", "public.vec_content")
	s.startLlama(t)

	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (1, $1), (2, $2), (3, $3)", pngImage(t, 1), jpegImage(t, 2), gifImage(t, 3, true))
	s.sync(t, 60*time.Second)

	for id := 1; id <= 3; id++ {
		a, c := s.vectorOf(t, "public.vec_auto", id), s.vectorOf(t, "public.vec_content", id)
		if len(a) != llamaDim || len(c) != llamaDim || math.Abs(norm(a)-1) > 1e-3 {
			t.Fatalf("row %d: %d and %d values, norm %f", id, len(a), len(c), norm(a))
		}
		// llama.cpp does not promise bit-identical floats across request shapes (the
		// batch it builds differs, and with it the order of the sums), so the same image
		// must give the same direction: cosine ≥ 0.9999, every value within 1e-3. Another
		// image is not that close (checked below), so a shape that embedded the wrong
		// input, or none, fails.
		if cos := cosine(a, c); cos < 0.9999 {
			t.Fatalf("row %d: the two shapes give cosine %f, want ≥ 0.9999", id, cos)
		}
		for i := range a {
			if math.Abs(a[i]-c[i]) > 1e-3 {
				t.Fatalf("row %d: the two shapes differ at %d: %f and %f", id, i, a[i], c[i])
			}
		}
	}
	if cos := cosine(s.vectorOf(t, "public.vec_auto", 1), s.vectorOf(t, "public.vec_content", 2)); cos >= 0.9999 {
		t.Errorf("rows 1 and 2 (different images) give cosine %f: the comparison above cannot tell images apart", cos)
	}
	if n := len(px.requests("/props", nil)); n != 1 {
		t.Errorf("GET /props made %d times, want once", n)
	}
	var multimodal, content int
	for _, r := range px.requests("/v1/embeddings", nil) {
		switch {
		case bytes.Contains(r.body, []byte(`"multimodal_data"`)) && bytes.Contains(r.body, []byte(`__media_`)) && !bytes.Contains(r.body, []byte(`__media__`)):
			multimodal++
		case bytes.Contains(r.body, []byte(`"content"`)):
			content++
		}
	}
	if multimodal == 0 || content == 0 {
		t.Errorf("requests: %d multimodal_data with the server's marker, %d content; want both", multimodal, content)
	}
}

// TestLlamaServerRefusedImageInBatch: a model that allows WebP sends one in a batch;
// llama-server fails the whole request with HTTP 500 "Failed to load image or audio
// file". The batch is split down to the WebP, which alone is a provider_error, sent
// once per split and never retried; every other row gets its vector.
func TestLlamaServerRefusedImageInBatch(t *testing.T) {
	px := newLlamaProxy(t, integration.StartLlama(t))
	s := llamaSource(t)
	s.exec(t, `INSERT INTO pgimageai.models (name, provider, base_url, model, options) VALUES
 ('emb', 'llamacpp', $1, 'tiny', '{"batch_size": 8, "batch_wait": "2s",
  "formats": ["image/png", "image/jpeg", "image/gif", "image/webp"]}')`, px.URL+"/v1")
	s.embedRule(t, "vec", "emb", "public.vecs")
	s.startLlama(t)

	webp := realWebP(t)
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (1, $1), (2, $2), (3, $3), (4, $4), (5, $5), (6, $6)",
		pngImage(t, 1), jpegImage(t, 2), gifImage(t, 3, false), webp, pngImage(t, 5), jpegImage(t, 6))
	s.sync(t, 60*time.Second)

	for _, id := range []int{1, 2, 3, 5, 6} {
		if v := s.vectorOf(t, "public.vecs", id); len(v) != llamaDim || math.Abs(norm(v)-1) > 1e-3 {
			t.Errorf("row %d: %d values, norm %f", id, len(v), norm(v))
		}
	}
	reason, detail := s.openError(t, "vec", 4)
	if reason != "provider_error" || !strings.Contains(detail, "HTTP 500") || !strings.Contains(detail, "Failed to load image") || strings.Contains(detail, "attempts") {
		t.Errorf("the WebP: %s %q, want provider_error with llama-server's HTTP 500, not retried", reason, detail)
	}
	withWebP := px.requests("/v1/embeddings", webp)
	if len(withWebP) < 2 || bytes.Count(withWebP[0].body, []byte(`"multimodal_data"`)) < 2 {
		t.Fatalf("%d requests carried the WebP, the first with %d images; want a batch, then its split",
			len(withWebP), bytes.Count(withWebP[0].body, []byte(`"multimodal_data"`)))
	}
	seen := map[string]bool{}
	for _, r := range withWebP {
		if seen[string(r.body)] {
			t.Fatalf("a request with the WebP was sent twice (retried)")
		}
		seen[string(r.body)] = true
	}
}

// TestLlamaServerJSONSchema: response_format with a JSON schema goes to llama-server as
// OpenAI's json_schema response format; the server constrains its sampling to the
// schema, so even a random-weight model answers valid JSON, stored as jsonb.
func TestLlamaServerJSONSchema(t *testing.T) {
	px := newLlamaProxy(t, integration.StartLlama(t))
	s := llamaSource(t)
	s.exec(t, `INSERT INTO pgimageai.models (name, provider, base_url, model, options) VALUES ('vision', 'openai', $1, 'tiny',
 '{"max_tokens": 400, "response_format": {"type": "object", "additionalProperties": false,
   "properties": {"has_person": {"type": "boolean"}, "color": {"type": "string", "enum": ["red", "green", "blue"]}},
   "required": ["has_person", "color"]}}')`, px.URL+"/v1")
	s.rule(t, "tags", "vision", "public.tags", "tags")
	s.startLlama(t)

	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (1, $1), (2, $2)", pngImage(t, 1), jpegImage(t, 2))
	s.sync(t, 60*time.Second)

	for id := 1; id <= 2; id++ {
		var typ, person, color *string
		err := s.conn.QueryRow(context.Background(), `SELECT pg_typeof(tags)::text, jsonb_typeof(tags->'has_person'), tags->>'color'
FROM public.tags WHERE id = $1`, id).Scan(&typ, &person, &color)
		if err != nil || typ == nil || *typ != "jsonb" || person == nil || *person != "boolean" || color == nil || !strings.Contains("red green blue", *color) {
			t.Errorf("row %d: type %v, has_person %v, color %v (%v); want jsonb following the schema", id, deref(typ), deref(person), deref(color), err)
		}
	}
	rows, err := s.conn.Query(context.Background(), "SELECT reason, detail FROM pgimageai.errors WHERE rule = 'tags'")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var reason, detail string
		if err := rows.Scan(&reason, &detail); err != nil {
			t.Fatal(err)
		}
		t.Errorf("errors row %s: %s", reason, detail)
	}
	rows.Close()
	if r := px.requests("/v1/chat/completions", nil); len(r) == 0 || !bytes.Contains(r[0].body, []byte(`"json_schema"`)) {
		t.Errorf("no chat request carried a json_schema response format")
	}
}

// TestLlamaServerRestart: llama-server draws a new media marker at every start, and
// answers a prompt with the old one with HTTP 500 "Failed to tokenize prompt". After a
// restart, the llamacpp provider reads GET /props again and the rows keep their vectors.
func TestLlamaServerRestart(t *testing.T) {
	l := integration.StartLlama(t)
	px := newLlamaProxy(t, l)
	s := llamaSource(t)
	s.exec(t, `INSERT INTO pgimageai.models (name, provider, base_url, model, options) VALUES
 ('emb', 'llamacpp', $1, 'tiny', '{"max_retries": 1}')`, px.URL+"/v1")
	s.embedRule(t, "vec", "emb", "public.vecs")
	s.startLlama(t)

	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (1, $1)", pngImage(t, 1))
	s.sync(t, 60*time.Second)
	if err := l.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (2, $1)", pngImage(t, 2))
	s.sync(t, 60*time.Second)

	for id := 1; id <= 2; id++ {
		if v := s.vectorOf(t, "public.vecs", id); len(v) != llamaDim {
			t.Errorf("row %d: %d values", id, len(v))
		}
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE rule = 'vec'"); n != 0 {
		t.Errorf("errors rows = %d, want 0", n)
	}
	props := px.requests("/props", nil)
	if len(props) != 2 {
		t.Errorf("GET /props made %d times, want 2 (before and after the restart)", len(props))
	}
}
