package normalize

import (
	"bytes"
	"image"

	"image/jpeg"
	"math/rand/v2"
	"sync"
	"testing"
)

// photo12MP is a 4032 × 3024 image that compresses like a photo: smooth
// shapes and sensor-like noise (a JPEG of about 3–4 MB at quality 90).
var photo12MP = sync.OnceValue(func() *image.RGBA {
	const w, h = 4032, 3024
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	rng := rand.New(rand.NewPCG(1, 2))
	for y := range h {
		for x := range w {
			n := uint8(rng.IntN(24))
			i := m.PixOffset(x, y)
			m.Pix[i] = uint8(x*200/w) + n
			m.Pix[i+1] = uint8(y*200/h) + n
			m.Pix[i+2] = uint8((x+y)*100/(w+h)) + 60 + n
			m.Pix[i+3] = 255
		}
	}
	return m
})

// BenchmarkResize12MP: the resize alone, decoded image in hand.
func BenchmarkResize12MP(b *testing.B) {
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, photo12MP(), &jpeg.Options{Quality: 90}); err != nil {
		b.Fatal(err)
	}
	m, err := jpeg.Decode(&buf)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		resize(m, 1024, 768)
	}
}
