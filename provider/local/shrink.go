package local

import (
	"image"
	"image/draw"
	"math"
)

// shrink returns m as RGBA (premultiplied), scaled to fit in workSize ×
// workSize with its aspect ratio kept; smaller images are copied, never
// enlarged. Each output pixel is the exact area average of the source pixels
// it covers — a box filter, so fine patterns average out instead of aliasing,
// the same way whatever the source size.
//
// The source is converted to RGBA one band of rows at a time (the rows of one
// output row), by image/draw's per-type fast paths, so memory stays at a few
// source rows whatever the image size. This is 2–4 times faster than
// x/image/draw's BiLinear or CatmullRom kernels, which convert every tap, and
// unlike ApproxBiLinear it does not skip pixels.
func shrink(m image.Image) *image.RGBA {
	b := m.Bounds()
	sw, sh := b.Dx(), b.Dy()
	dw, dh := fit(sw, sh, workSize)
	dst := image.NewRGBA(image.Rect(0, 0, dw, dh))
	if dw == sw && dh == sh {
		draw.Draw(dst, dst.Bounds(), m, b.Min, draw.Src)
		return dst
	}
	tx, ty := boxTaps(sw, dw), boxTaps(sh, dh)
	bandRows := 0
	for _, taps := range ty {
		bandRows = max(bandRows, len(taps))
	}
	band := image.NewRGBA(image.Rect(0, 0, sw, bandRows))
	acc := make([]float64, 4*dw)
	for oy, taps := range ty {
		first := taps[0].i
		draw.Draw(band, image.Rect(0, 0, sw, len(taps)), m, image.Pt(b.Min.X, b.Min.Y+first), draw.Src)
		clear(acc)
		for j, t := range taps {
			row := band.Pix[j*band.Stride : j*band.Stride+4*sw]
			for ox, xt := range tx {
				var r, g, bl, a float64
				for _, u := range xt {
					p := row[4*u.i : 4*u.i+4 : 4*u.i+4]
					r += float64(p[0]) * u.w
					g += float64(p[1]) * u.w
					bl += float64(p[2]) * u.w
					a += float64(p[3]) * u.w
				}
				q := acc[4*ox : 4*ox+4 : 4*ox+4]
				q[0] += r * t.w
				q[1] += g * t.w
				q[2] += bl * t.w
				q[3] += a * t.w
			}
		}
		out := dst.Pix[oy*dst.Stride : oy*dst.Stride+4*dw]
		for i, v := range acc {
			out[i] = uint8(min(math.Round(v), 255))
		}
	}
	return dst
}

// fit returns the size of a w × h image scaled down to fit in n × n.
func fit(w, h, n int) (int, int) {
	if w <= n && h <= n {
		return w, h
	}
	if w >= h {
		return n, max(1, int(math.Round(float64(h)*float64(n)/float64(w))))
	}
	return max(1, int(math.Round(float64(w)*float64(n)/float64(h)))), n
}

type tap struct {
	i int     // source index
	w float64 // weight
}

// boxTaps returns, for each of out cells spanning in samples, the samples it
// covers and the fraction of the cell each covers, which sum to 1. Cells
// shrink or enlarge alike.
func boxTaps(in, out int) [][]tap {
	scale := float64(in) / float64(out)
	taps := make([][]tap, out)
	for o := range taps {
		lo, hi := float64(o)*scale, float64(o+1)*scale
		for i := int(lo); i < in && float64(i) < hi; i++ {
			if w := min(hi, float64(i+1)) - max(lo, float64(i)); w > 0 {
				taps[o] = append(taps[o], tap{i, w / scale})
			}
		}
	}
	return taps
}
