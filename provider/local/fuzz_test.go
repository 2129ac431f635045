package local

import (
	"context"
	"errors"
	"image/color"
	"testing"

	"github.com/pgimageai/pgimageai/normalize/normtest"
	"github.com/pgimageai/pgimageai/provider"
)

// FuzzLoad feeds arbitrary bytes to every decoder: each call ends in a
// description or a permanent *provider.Error, never a panic, and never
// decodes more than max_pixels.
func FuzzLoad(f *testing.F) {
	img := solid(12, 9, color.RGBA{10, 200, 90, 255})
	f.Add(encodePNG(f, img).Data, uint8(0))
	f.Add(encodeJPEG(f, img, 75).Data, uint8(1))
	f.Add(encodeGIF(f, img).Data, uint8(2))
	f.Add(readFixture(f, "lossless.webp").Data, uint8(3))
	f.Add(readFixture(f, "lossy.webp").Data, uint8(3))
	f.Add(readFixture(f, "alpha.webp").Data, uint8(3))
	f.Add(pngHeader(100000, 100000), uint8(0))
	f.Add(normtest.ProgressiveJPEG(2048, 2000), uint8(1))
	mimes := []string{"image/png", "image/jpeg", "image/gif", "image/webp"}
	p := newTestProvider(f, `{"max_pixels":1000000}`)
	f.Fuzz(func(t *testing.T, data []byte, kind uint8) {
		in := provider.Image{Data: data, MIME: mimes[int(kind)%len(mimes)]}
		c, err := p.GenerateText(context.Background(), in, "")
		if err != nil {
			var pe *provider.Error
			if !errors.As(err, &pe) || (pe.Kind != provider.Permanent && pe.Kind != provider.TooLarge) {
				t.Fatalf("err = %#v, want a permanent or too_large *provider.Error", err)
			}
			return
		}
		if c.Text == "" {
			t.Fatal("empty description")
		}
		if _, err := p.EmbedImage(context.Background(), in); err != nil {
			t.Fatalf("GenerateText decoded the image but EmbedImage failed: %v", err)
		}
	})
}
