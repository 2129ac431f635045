package normalize

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"os"
	"testing"
)

// gradient is the source of testdata/gradient.{png,heic,avif}.
func gradient() *image.RGBA {
	m := image.NewRGBA(image.Rect(0, 0, 64, 48))
	for y := range 48 {
		for x := range 64 {
			m.Set(x, y, color.RGBA{uint8(4 * x), uint8(5 * y), 128, 255})
		}
	}
	return m
}

// TestWriteGradient writes testdata/gradient.png for testdata/generate.sh
// when PGIMAGEAI_WRITE_FIXTURES=1.
func TestWriteGradient(t *testing.T) {
	switch os.Getenv("PGIMAGEAI_WRITE_FIXTURES") {
	case "bench":
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, photo12MP(), &jpeg.Options{Quality: 90}); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("testdata/12mp.jpg", buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	case "1":
	default:
		return
	}
	if err := os.WriteFile("testdata/gradient.png", encodePNG(t, gradient()), 0o644); err != nil {
		t.Fatal(err)
	}
}
