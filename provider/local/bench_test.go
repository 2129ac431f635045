package local

import (
	"context"
	"image/color"
	"testing"

	"github.com/pgimageai/pgimageai/provider"
)

// BenchmarkLocal measures COMPLETE and EMBED on a 1024x768 photo-like image,
// decoding included.
func BenchmarkLocal(b *testing.B) {
	n := valueNoise(9)
	sky, ground := color.RGBA{90, 150, 230, 255}, color.RGBA{70, 120, 40, 255}
	m := paint(1024, 768, func(u, v float64) color.RGBA {
		if v > 0.55+0.1*n(u, 0.3) {
			return mix(ground, color.RGBA{A: 255}, n(u, v))
		}
		return mix(sky, color.RGBA{255, 255, 255, 255}, 1.5*n(u, v)-0.4)
	})
	images := []struct {
		name string
		img  provider.Image
	}{
		{"JPEG", encodeJPEG(b, m, 85)},
		{"PNG", encodePNG(b, m)},
	}
	p := newTestProvider(b, "")
	ctx := context.Background()
	for _, im := range images {
		b.Run("COMPLETE/"+im.name, func(b *testing.B) {
			b.SetBytes(int64(len(im.img.Data)))
			for b.Loop() {
				if _, err := p.GenerateText(ctx, im.img, ""); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("EMBED/"+im.name, func(b *testing.B) {
			b.SetBytes(int64(len(im.img.Data)))
			for b.Loop() {
				if _, err := p.EmbedImage(ctx, im.img); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
