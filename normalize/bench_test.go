package normalize

import (
	"bytes"
	"context"
	"image"

	"image/jpeg"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/pgimageai/pgimageai/magic"
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

// bench12MP returns the 12 MP fixture in format name: JPEG made here; HEIC
// and AVIF from testdata/12mp.{heic,avif}, which `testdata/generate.sh
// bench` writes (large files, not committed).
func bench12MP(b *testing.B, name string) []byte {
	b.Helper()
	if name == "jpeg" {
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, photo12MP(), &jpeg.Options{Quality: 90}); err != nil {
			b.Fatal(err)
		}
		return withEXIF(buf.Bytes(), exifBlock(6))
	}
	data, err := os.ReadFile(filepath.Join("testdata", "12mp."+name))
	if err != nil {
		b.Skipf("%v: run normalize/testdata/generate.sh bench first", err)
	}
	return data
}

// BenchmarkNormalize12MP: one 4032 × 3024 photo normalised for OpenAI's
// detail high (to 1024 × 768, or 768 × 1024 turned), per format. ns/op is
// the CPU of one image on one core; the bytes metrics are what is sent
// before and after; voyage-tokens what Voyage's pixel rule (a token per 560
// pixels, images up to 2,000,000 pixels) counts before and after.
func BenchmarkNormalize12MP(b *testing.B) {
	for _, name := range []string{"jpeg", "heic", "avif"} {
		b.Run(name, func(b *testing.B) {
			img := bench12MP(b, name)
			f, err := magic.Detect(img)
			if err != nil {
				b.Fatal(err)
			}
			s := photos
			s.MaxDecodedBytes = 1 << 30 // a 12 MP AVIF needs some 700 MiB
			var r Result
			b.ReportAllocs()
			for b.Loop() {
				if r, err = Image(context.Background(), img, f, s); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(img)), "bytes-before")
			b.ReportMetric(float64(len(r.Data)), "bytes-after")
			vw, vh := Voyage.Fit(4032, 3024)
			b.ReportMetric(float64((4032*3024+559)/560), "voyage-tokens-before")
			b.ReportMetric(float64((vw*vh+559)/560), "voyage-tokens-after")
			b.ReportMetric(1e9/(float64(b.Elapsed().Nanoseconds())/float64(b.N)), "images/s/core")
		})
	}
}

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
