package local

import (
	"image"
	"image/color"
	"math"
	"slices"
	"sort"
	"testing"

	"github.com/pgimageai/pgimageai/provider"
)

func TestEmbedNearDuplicates(t *testing.T) {
	p := newTestProvider(t, "")
	originals := testImages()
	names := make([]string, 0, len(originals))
	for name := range originals {
		names = append(names, name)
	}
	sort.Strings(names)
	vectors := make(map[string][]float32, len(names))
	for _, name := range names {
		vectors[name] = embedOf(t, p, encodePNG(t, originals[name]))
	}

	copies := []struct {
		name string
		make func(testing.TB, image.Image) provider.Image
	}{
		{"resized 50%", func(tb testing.TB, m image.Image) provider.Image { return encodePNG(tb, resized(m, 0.5)) }},
		{"resized 137%", func(tb testing.TB, m image.Image) provider.Image { return encodePNG(tb, resized(m, 1.37)) }},
		{"JPEG quality 60", func(tb testing.TB, m image.Image) provider.Image { return encodeJPEG(tb, m, 60) }},
		{"resized 50% as JPEG 60", func(tb testing.TB, m image.Image) provider.Image { return encodeJPEG(tb, resized(m, 0.5), 60) }},
	}
	minOwn, maxOther := 1.0, -1.0
	for _, name := range names {
		for _, c := range copies {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				v := embedOf(t, p, c.make(t, originals[name]))
				own := cosine(v, vectors[name])
				minOwn = min(minOwn, own)
				for _, other := range names {
					if other == name {
						continue
					}
					sim := cosine(v, vectors[other])
					maxOther = max(maxOther, sim)
					if sim >= own {
						t.Errorf("similarity to %s = %.4f >= to its original %.4f", other, sim, own)
					}
				}
			})
		}
	}
	t.Logf("own similarity >= %.4f; similarity to another original <= %.4f", minOwn, maxOther)
	// Measured: own >= 0.96, another <= 0.69. The bounds leave room for a
	// change of the features, not for a copy that looks like another image.
	if minOwn < 0.9 || maxOther > 0.8 {
		t.Errorf("own similarity >= %.4f (want >= 0.9), to another original <= %.4f (want <= 0.8)", minOwn, maxOther)
	}

	// The originals themselves are told apart.
	for i, a := range names {
		for _, b := range names[i+1:] {
			if sim := cosine(vectors[a], vectors[b]); sim > 0.95 {
				t.Errorf("originals %s and %s: similarity %.4f, want them distinct", a, b, sim)
			}
		}
	}
}

func TestEmbedVector(t *testing.T) {
	p := newTestProvider(t, "")
	tests := []struct {
		name string
		img  provider.Image
	}{
		{"photo-like PNG", encodePNG(t, testImages()["landscape"])},
		{"JPEG", encodeJPEG(t, testImages()["clouds-1"], 80)},
		{"GIF", encodeGIF(t, testImages()["radial"])},
		{"solid mid grey", encodePNG(t, solid(40, 30, color.RGBA{128, 128, 128, 255}))},
		{"fully transparent", encodePNG(t, image.NewNRGBA(image.Rect(0, 0, 8, 8)))},
		{"one pixel", encodePNG(t, solid(1, 1, color.RGBA{200, 10, 10, 255}))},
		{"one row", encodePNG(t, resized(testImages()["gradient"], 0.01))},
		{"tall", encodePNG(t, solid(3, 900, color.RGBA{0, 0, 255, 255}))},
		{"WebP lossless fixture", readFixture(t, "lossless.webp")},
		{"WebP lossy fixture", readFixture(t, "lossy.webp")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := embedOf(t, p, tt.img)
			if len(v) != Dimensions || Dimensions < 16 {
				t.Fatalf("length %d, want Dimensions = %d (>= 16)", len(v), Dimensions)
			}
			var norm float64
			for i, x := range v {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					t.Fatalf("element %d is %v", i, x)
				}
				norm += float64(x) * float64(x)
			}
			if math.Abs(math.Sqrt(norm)-1) > 1e-5 {
				t.Fatalf("|v| = %v, want 1", math.Sqrt(norm))
			}
			if again := embedOf(t, p, tt.img); !slices.Equal(v, again) {
				t.Fatal("same bytes gave a different vector")
			}
		})
	}
}

func TestBoxTapsSumToOne(t *testing.T) {
	for _, tt := range []struct{ in, out int }{{1, 64}, {3, 64}, {64, 64}, {100, 64}, {256, 64}, {192, 64}, {7, 3}} {
		for o, taps := range boxTaps(tt.in, tt.out) {
			var s float64
			for _, tp := range taps {
				s += tp.w
			}
			if math.Abs(s-1) > 1e-9 {
				t.Errorf("boxTaps(%d, %d)[%d] sums to %v", tt.in, tt.out, o, s)
			}
		}
	}
}

func TestZigzag(t *testing.T) {
	if len(zigzag) != dctLen {
		t.Fatalf("len = %d", len(zigzag))
	}
	want := [][2]int{{0, 1}, {1, 0}, {2, 0}, {1, 1}, {0, 2}, {0, 3}}
	if !slices.Equal(zigzag[:len(want)], want) {
		t.Fatalf("zigzag starts %v, want %v", zigzag[:len(want)], want)
	}
}
