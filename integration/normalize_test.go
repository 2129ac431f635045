package integration_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/jpeg"
	_ "image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/image/bmp"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/normalize/normtest"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../normalize/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var dataURL = regexp.MustCompile(`data:(image/[a-z]+);base64,([A-Za-z0-9+/=]+)`)

// sentImages decodes the data URLs of the requests' bodies.
func sentImages(t testing.TB, bodies [][]byte) (mimes []string, imgs [][]byte) {
	t.Helper()
	for _, b := range bodies {
		for _, m := range dataURL.FindAllSubmatch(b, -1) {
			raw, err := base64.StdEncoding.DecodeString(string(m[2]))
			if err != nil {
				t.Fatal(err)
			}
			mimes, imgs = append(mimes, string(m[1])), append(imgs, raw)
		}
	}
	return mimes, imgs
}

// TestLlamaServerNormalizes: a real llama-server captions a sideways JPEG
// (sent upright, without EXIF), a WebP (which its decoder cannot read: the
// model's formats leave it out, so it is sent converted), a HEIC, an AVIF
// and a BMP — each converted to a format stb_image reads.
func TestLlamaServerNormalizes(t *testing.T) {
	px := newLlamaProxy(t, integration.StartLlama(t))
	s := llamaSource(t)
	s.exec(t, `INSERT INTO pgimageai.models (name, provider, base_url, model, options) VALUES
 ('vision', 'openai', $1, 'tiny', '{"max_tokens": 12, "formats": ["image/png", "image/jpeg", "image/gif"]}')`, px.URL+"/v1")
	s.rule(t, "caption", "vision", "public.captions", "caption")
	s.startLlama(t)

	var bmpBuf bytes.Buffer
	if err := bmp.Encode(&bmpBuf, testImage(5)); err != nil {
		t.Fatal(err)
	}
	sideways := normtest.SidewaysJPEG(t, 320, 240)
	imgs := [][]byte{sideways, realWebP(t), fixture(t, "gradient.heic"), fixture(t, "gradient.avif"), bmpBuf.Bytes()}
	for i, img := range imgs {
		s.exec(t, "INSERT INTO public.photos (id, img) VALUES ($1, $2)", i+1, img)
	}
	s.sync(t, 90*time.Second)

	for id := 1; id <= len(imgs); id++ {
		var caption *string
		if err := s.conn.QueryRow(context.Background(), "SELECT caption FROM public.captions WHERE id = $1", id).Scan(&caption); err != nil || caption == nil || *caption == "" {
			t.Errorf("caption of row %d = %v (%v), want the server's text", id, deref(caption), err)
		}
	}
	var bodies [][]byte
	for _, r := range px.requests("/v1/chat/completions", nil) {
		bodies = append(bodies, r.body)
	}
	mimes, sent := sentImages(t, bodies)
	upright := 0
	for i, img := range sent {
		if mimes[i] == "image/webp" || mimes[i] == "image/heic" || mimes[i] == "image/avif" || mimes[i] == "image/bmp" {
			t.Errorf("a %s reached llama-server", mimes[i])
		}
		if bytes.Contains(img, []byte("Exif")) {
			t.Errorf("EXIF reached llama-server in a %s", mimes[i])
		}
		if bytes.Equal(img, sideways) {
			t.Error("the sideways JPEG was sent as stored")
		}
		m, _, err := image.Decode(bytes.NewReader(img))
		if err != nil {
			t.Fatalf("sent %s does not decode: %v", mimes[i], err)
		}
		if m.Bounds().Dx() == 240 && m.Bounds().Dy() == 320 {
			r, _, b, _ := m.At(120, 40).RGBA()
			if r > b { // turned clockwise: the red left half is on top
				upright++
			}
		}
	}
	if upright != 1 {
		t.Errorf("%d upright 240x320 images sent, want the sideways JPEG once", upright)
	}
}

// TestNormalizeFake: an OpenAI-compatible fake with detail high receives a
// 4032 × 3024 sideways photo as what OpenAI's model looks at: 768 × 1024,
// upright, a JPEG without EXIF (https://platform.openai.com/docs/guides/images-vision:
// fit 2048 × 2048, then shortest side 768).
func TestNormalizeFake(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	var mu sync.Mutex
	var got [][]byte
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		var req struct {
			Messages []struct {
				Content []struct {
					Type     string `json:"type"`
					ImageURL struct {
						URL    string `json:"url"`
						Detail string `json:"detail"`
					} `json:"image_url"`
				} `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) != 1 || len(req.Messages[0].Content) != 2 {
			http.Error(w, "bad request shape", 400)
			return
		}
		part := req.Messages[0].Content[1]
		if part.Type != "image_url" || part.ImageURL.Detail != "high" || !strings.HasPrefix(part.ImageURL.URL, "data:image/jpeg;base64,") {
			http.Error(w, "bad image part", 400)
			return
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(part.ImageURL.URL, "data:image/jpeg;base64,"))
		if err != nil {
			http.Error(w, "bad base64", 400)
			return
		}
		mu.Lock()
		got = append(got, raw)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"a photo"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`)
	}))
	t.Cleanup(fake.Close)

	s := newSource(t)
	s.exec(t, `INSERT INTO pgimageai.models (name, provider, base_url, model, options) VALUES
 ('vision', 'openai', $1, 'gpt-test', '{"detail": "high"}')`, fake.URL+"/v1")
	s.rule(t, "caption", "vision", "public.captions", "caption")
	s.start(t, s.config(t))
	photo := normtest.SidewaysJPEG(t, 4032, 3024)
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (1, $1)", photo)
	s.sync(t, 60*time.Second)

	var caption *string
	if err := s.conn.QueryRow(context.Background(), "SELECT caption FROM public.captions WHERE id = 1").Scan(&caption); err != nil || deref(caption) != "a photo" {
		t.Fatalf("caption %s (%v)", deref(caption), err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("%d requests, want 1", len(got))
	}
	if bytes.Contains(got[0], []byte("Exif")) {
		t.Error("EXIF reached the provider")
	}
	m, err := jpeg.Decode(bytes.NewReader(got[0]))
	if err != nil {
		t.Fatal(err)
	}
	if m.Bounds().Dx() != 768 || m.Bounds().Dy() != 1024 {
		t.Fatalf("provider got %v, want 768x1024", m.Bounds())
	}
	t.Logf("sent %d bytes for a stored %d-byte 4032x3024 JPEG", len(got[0]), len(photo))
	if len(got[0])*10 > len(photo) {
		t.Errorf("sent %d bytes of %d: not reduced", len(got[0]), len(photo))
	}
}
