package local

import (
	"image"
	"image/color"
	"image/draw"
	"math"
	"math/rand/v2"
	"testing"
)

// refShrink is the box filter computed the direct way, with every tap of
// every output pixel listed (boxTaps): the reference shrink must match.
func refShrink(m image.Image) *image.RGBA {
	b := m.Bounds()
	src := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(src, src.Bounds(), m, b.Min, draw.Src)
	dw, dh := fit(b.Dx(), b.Dy(), workSize)
	tx, ty := boxTaps(b.Dx(), dw), boxTaps(b.Dy(), dh)
	dst := image.NewRGBA(image.Rect(0, 0, dw, dh))
	for oy, ys := range ty {
		for ox, xs := range tx {
			var acc [4]float64
			for _, v := range ys {
				for _, u := range xs {
					p := src.Pix[src.PixOffset(u.i, v.i):]
					for c := range 4 {
						acc[c] += float64(p[c]) * u.w * v.w
					}
				}
			}
			q := dst.Pix[dst.PixOffset(ox, oy):]
			for c := range 4 {
				q[c] = uint8(min(math.Round(acc[c]), 255))
			}
		}
	}
	return dst
}

func TestShrinkMatchesBoxFilter(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := [][2]int{{300, 200}, {257, 256}, {1000, 3}, {3, 1000}, {513, 511}, {2500, 7}, {777, 1}, {256, 256}, {100, 40}}
	for _, sz := range sizes {
		m := image.NewNRGBA(image.Rect(5, 9, 5+sz[0], 9+sz[1])) // an origin not at (0, 0)
		for i := range m.Pix {
			m.Pix[i] = uint8(rng.IntN(256))
		}
		got, want := shrink(m), refShrink(m)
		if got.Bounds() != want.Bounds() {
			t.Fatalf("%v: bounds %v, want %v", sz, got.Bounds(), want.Bounds())
		}
		for i := range got.Pix {
			if d := int(got.Pix[i]) - int(want.Pix[i]); d < -1 || d > 1 {
				t.Fatalf("%v: byte %d = %d, want %d", sz, i, got.Pix[i], want.Pix[i])
			}
		}
	}
}

// TestShrinkMemory: shrink allocates in proportion to its output, not to
// the source's width or height.
func TestShrinkMemory(t *testing.T) {
	for _, sz := range [][2]int{{16384, 1}, {1, 16384}, {16384, 64}, {4000, 3000}} {
		m := image.NewUniform(color.RGBA{10, 20, 30, 255})
		src := &bounded{m, image.Rect(0, 0, sz[0], sz[1])}
		allocs := allocated(func() { shrink(src) })
		if allocs > 1<<20 {
			t.Errorf("shrink of %dx%d allocated %d bytes, want under 1 MiB", sz[0], sz[1], allocs)
		}
	}
}

// bounded is an image of m's colour with the given bounds.
type bounded struct {
	*image.Uniform
	r image.Rectangle
}

func (b *bounded) Bounds() image.Rectangle { return b.r }
