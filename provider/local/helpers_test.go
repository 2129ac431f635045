package local

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/color/palette"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/image/draw"

	"github.com/pgimageai/pgimageai/provider"
)

// newTestProvider builds a provider with the given options JSON ("" = none).
func newTestProvider(tb testing.TB, options string) *Provider {
	tb.Helper()
	p, err := New(provider.Model{Name: "test", Provider: "local", Options: json.RawMessage(options)}, nil)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return p
}

func encodePNG(tb testing.TB, m image.Image) provider.Image {
	tb.Helper()
	var b bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed} // the default is slow under -race
	if err := enc.Encode(&b, m); err != nil {
		tb.Fatal(err)
	}
	return provider.Image{Data: b.Bytes(), MIME: "image/png"}
}

func encodeJPEG(tb testing.TB, m image.Image, quality int) provider.Image {
	tb.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: quality}); err != nil {
		tb.Fatal(err)
	}
	return provider.Image{Data: b.Bytes(), MIME: "image/jpeg"}
}

func encodeGIF(tb testing.TB, m image.Image) provider.Image {
	tb.Helper()
	var b bytes.Buffer
	if err := gif.Encode(&b, m, &gif.Options{NumColors: 256, Quantizer: nil, Drawer: draw.FloydSteinberg}); err != nil {
		tb.Fatal(err)
	}
	return provider.Image{Data: b.Bytes(), MIME: "image/gif"}
}

// embedOf returns the vector of img, failing the test on error.
func embedOf(tb testing.TB, p *Provider, img provider.Image) []float32 {
	tb.Helper()
	e, err := p.EmbedImage(context.Background(), img)
	if err != nil {
		tb.Fatalf("EmbedImage: %v", err)
	}
	return e.Vector
}

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}

// resized returns m scaled by factor with bilinear interpolation, a different
// filter from the provider's own.
func resized(m image.Image, factor float64) image.Image {
	b := m.Bounds()
	w := int(math.Round(float64(b.Dx()) * factor))
	h := int(math.Round(float64(b.Dy()) * factor))
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.BiLinear.Scale(dst, dst.Bounds(), m, b, draw.Src, nil)
	return dst
}

// paint returns a w × h image whose pixel (x, y) is f(x/w, y/h).
func paint(w, h int, f func(u, v float64) color.RGBA) *image.RGBA {
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.SetRGBA(x, y, f((float64(x)+0.5)/float64(w), (float64(y)+0.5)/float64(h)))
		}
	}
	return m
}

func solid(w, h int, c color.RGBA) *image.RGBA {
	return paint(w, h, func(u, v float64) color.RGBA { return c })
}

func mix(a, b color.RGBA, t float64) color.RGBA {
	t = max(0, min(1, t))
	l := func(x, y uint8) uint8 { return uint8(math.Round(float64(x)*(1-t) + float64(y)*t)) }
	return color.RGBA{l(a.R, b.R), l(a.G, b.G), l(a.B, b.B), l(a.A, b.A)}
}

// valueNoise returns a smooth random field in [0, 1]: octaves of bilinearly
// interpolated lattice noise, like clouds or terrain in a photograph.
func valueNoise(seed uint64) func(u, v float64) float64 {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	const size = 64
	var lattice [size][size]float64
	for i := range lattice {
		for j := range lattice[i] {
			lattice[i][j] = rng.Float64()
		}
	}
	octave := func(u, v float64, freq int) float64 {
		x, y := u*float64(freq), v*float64(freq)
		x0, y0 := int(x), int(y)
		fx, fy := x-float64(x0), y-float64(y0)
		at := func(i, j int) float64 { return lattice[j%size][i%size] }
		top := at(x0, y0)*(1-fx) + at(x0+1, y0)*fx
		bot := at(x0, y0+1)*(1-fx) + at(x0+1, y0+1)*fx
		return top*(1-fy) + bot*fy
	}
	return func(u, v float64) float64 {
		return (4*octave(u, v, 4) + 2*octave(u, v, 9) + octave(u, v, 19)) / 7
	}
}

// testImages returns distinct, non-trivial synthetic pictures of 320 × 240,
// made once; callers must not modify them.
var testImages = sync.OnceValue(makeTestImages)

func makeTestImages() map[string]image.Image {
	const w, h = 320, 240
	var (
		navy   = color.RGBA{20, 30, 90, 255}
		sky    = color.RGBA{110, 170, 235, 255}
		grass  = color.RGBA{60, 150, 50, 255}
		sun    = color.RGBA{250, 210, 40, 255}
		brick  = color.RGBA{150, 70, 40, 255}
		white  = color.RGBA{255, 255, 255, 255}
		black  = color.RGBA{0, 0, 0, 255}
		red    = color.RGBA{220, 30, 30, 255}
		purple = color.RGBA{120, 40, 160, 255}
	)
	grain := func(seed uint64) image.Image {
		rng := rand.New(rand.NewPCG(seed, 7))
		m := image.NewRGBA(image.Rect(0, 0, w, h))
		for i := 0; i < len(m.Pix); i += 4 {
			m.Pix[i], m.Pix[i+1], m.Pix[i+2], m.Pix[i+3] = uint8(rng.IntN(256)), uint8(rng.IntN(256)), uint8(rng.IntN(256)), 255
		}
		return m
	}
	clouds := func(seed uint64) image.Image {
		n := valueNoise(seed)
		return paint(w, h, func(u, v float64) color.RGBA { return mix(navy, white, 1.6*n(u, v)-0.3) })
	}
	return map[string]image.Image{
		"gradient": paint(w, h, func(u, v float64) color.RGBA { return mix(red, navy, (u+v)/2) }),
		"radial": paint(w, h, func(u, v float64) color.RGBA {
			return mix(sun, navy, math.Hypot((u-0.5)*4/3, v-0.5)*2)
		}),
		"checker": paint(w, h, func(u, v float64) color.RGBA {
			if (int(u*16)+int(v*12))%2 == 0 {
				return black
			}
			return white
		}),
		"stripes": paint(w, h, func(u, v float64) color.RGBA {
			return mix(grass, purple, 0.5+0.5*math.Sin((u*4+v*3)*2*math.Pi))
		}),
		"landscape": paint(w, h, func(u, v float64) color.RGBA {
			switch {
			case math.Hypot((u-0.75)*4/3, v-0.2) < 0.1:
				return sun
			case u > 0.2 && u < 0.45 && v > 0.45 && v < 0.75:
				return brick
			case v > 0.6:
				return grass
			}
			return mix(sky, white, v)
		}),
		"clouds-1": clouds(1),
		"clouds-2": clouds(2),
		"grain-3":  grain(3),
		"grain-4":  grain(4),
		"palette": paint(w, h, func(u, v float64) color.RGBA { // the Plan 9 palette in 20 × 20 tiles
			c := palette.Plan9[(int(u*16)*7+int(v*12)*31)%len(palette.Plan9)]
			r, g, b, _ := c.RGBA()
			return color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), 255}
		}),
	}
}

// readFixture returns a byte-exact file of testdata/ as an image of the MIME
// type its extension names.
func readFixture(tb testing.TB, name string) provider.Image {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	mime := map[string]string{".webp": "image/webp", ".png": "image/png", ".gif": "image/gif", ".jpg": "image/jpeg"}[filepath.Ext(name)]
	return provider.Image{Data: data, MIME: mime}
}
