package openai

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/pgimageai/pgimageai/provider"
)

// BenchmarkGenerateText8KiB is one call of an 8 KB image through the whole
// client path (go-openai, the body splice, net/http) to a loopback server
// that drains the request and answers at once: its allocations per call are
// the provider's share of the bridge's garbage.
func BenchmarkGenerateText8KiB(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, okBody)
	}))
	defer srv.Close()
	p, _ := newTestProvider(b, provider.Model{Name: "m", Provider: "openai", BaseURL: srv.URL, Model: "m"}, nil)
	img := provider.Image{Data: append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 8192)...), MIME: "image/png"}
	b.SetBytes(int64(len(img.Data)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := p.GenerateText(context.Background(), img, "Describe the image"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
