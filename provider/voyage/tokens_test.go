package voyage

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/gif"
	"image/jpeg"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/internal/fakeapi"
)

// pngHeader is the start of a w×h RGB PNG: signature and IHDR, all that
// image.DecodeConfig reads; seed makes distinct bytes after it.
func pngHeader(w, h uint32, seed byte) []byte {
	ihdr := binary.BigEndian.AppendUint32(nil, w)
	ihdr = binary.BigEndian.AppendUint32(ihdr, h)
	ihdr = append(ihdr, 8, 2, 0, 0, 0)
	chunk := append([]byte("IHDR"), ihdr...)
	b := []byte("\x89PNG\r\n\x1a\n")
	b = binary.BigEndian.AppendUint32(b, uint32(len(ihdr)))
	b = append(b, chunk...)
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(chunk))
	return append(b, seed)
}

func encoded(t *testing.T, w, h int, encode func(*bytes.Buffer, image.Image) error) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestImageTokens(t *testing.T) {
	webpData, err := os.ReadFile("../local/testdata/lossy.webp") // 32×24, made by cwebp
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		format magic.Format
		data   []byte
		want   int
	}{
		// docs.voyageai.com/docs/multimodal-embeddings: a token per 560 pixels.
		{name: "12-megapixel PNG", format: magic.PNG, data: pngHeader(4000, 3000, 0), want: 21429},
		{name: "560 pixels", format: magic.PNG, data: pngHeader(56, 10, 0), want: 1},
		{name: "561 pixels", format: magic.PNG, data: pngHeader(561, 1, 0), want: 2},
		{name: "JPEG 100×80", format: magic.JPEG, data: encoded(t, 100, 80, func(b *bytes.Buffer, m image.Image) error { return jpeg.Encode(b, m, nil) }), want: 15},
		{name: "GIF 33×17", format: magic.GIF, data: encoded(t, 33, 17, func(b *bytes.Buffer, m image.Image) error { return gif.Encode(b, m, nil) }), want: 2},
		{name: "WebP 32×24", format: magic.WebP, data: webpData, want: 2},
		{name: "unreadable header", format: magic.PNG, data: fakeapi.PNG.Data, want: MaxInputTokens},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := imageTokens(tt.format, tt.data); got != tt.want {
				t.Fatalf("imageTokens = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestBatchesPackedByTokens sends 32 twelve-megapixel photos (21,429
// tokens each, 685,728 in all): no request may pass 320,000 tokens, so they
// go as 14 + 14 + 4 even though batch_size is 32.
func TestBatchesPackedByTokens(t *testing.T) {
	srv := spec.NewServer(t)
	p, err := New(spec.Model(srv, `{"batch_size":32,"batch_wait":"2s"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			if _, err := p.EmbedImage(context.Background(), provider.Image{Data: pngHeader(4000, 3000, byte(i)), MIME: "image/png"}); err != nil {
				t.Errorf("image %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	var sizes []int
	for _, r := range srv.Requests() {
		n := len(spec.Inputs(r.Body))
		if n*21429 > MaxRequestTokens {
			t.Errorf("a request holds %d images, %d estimated tokens", n, n*21429)
		}
		sizes = append(sizes, n)
	}
	slices.Sort(sizes)
	if fmt.Sprint(sizes) != "[4 14 14]" {
		t.Fatalf("batch sizes = %v, want 3 requests (14, 14, 4)", sizes)
	}
}
