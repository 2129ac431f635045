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
// Its memory is proportional to its output, whatever the source's size or
// shape: the source is read one row at a time, converted to RGBA by
// image/draw's per-type fast paths in chunks of shrinkChunk pixels, and each
// source pixel is added to the (at most two) output columns and rows it
// overlaps, whose weights are computed as it goes — nothing is kept per
// source column or row. This is 2–4 times faster than x/image/draw's
// BiLinear or CatmullRom kernels, which convert every tap, and unlike
// ApproxBiLinear it does not skip pixels.
func shrink(m image.Image) *image.RGBA {
	b := m.Bounds()
	sw, sh := b.Dx(), b.Dy()
	dw, dh := fit(sw, sh, workSize)
	dst := image.NewRGBA(image.Rect(0, 0, dw, dh))
	if dw == sw && dh == sh {
		draw.Draw(dst, dst.Bounds(), m, b.Min, draw.Src)
		return dst
	}
	sx, sy := float64(sw)/float64(dw), float64(sh)/float64(dh) // >= 1
	norm := 1 / (sx * sy)
	chunk := image.NewRGBA(image.Rect(0, 0, min(sw, shrinkChunk), 1))
	row := make([]float64, 4*dw)  // one source row, resampled across
	acc := make([]float64, 4*dw)  // output row base
	next := make([]float64, 4*dw) // output row base+1
	base := 0
	flush := func() {
		out := dst.Pix[base*dst.Stride : base*dst.Stride+4*dw]
		for i, v := range acc {
			out[i] = uint8(min(math.Round(v*norm), 255))
		}
		acc, next = next, acc
		clear(next)
		base++
	}
	for y := range sh {
		clear(row)
		// Walk the row's output cells as the pixels go: cell ox ends at
		// edge; a pixel across it is split between ox and ox+1.
		ox, edge := 0, sx
		for x0 := 0; x0 < sw; x0 += shrinkChunk {
			n := min(shrinkChunk, sw-x0)
			draw.Draw(chunk, image.Rect(0, 0, n, 1), m, image.Pt(b.Min.X+x0, b.Min.Y+y), draw.Src)
			pix := chunk.Pix[:4*n]
			for i := range n {
				p := pix[4*i : 4*i+4 : 4*i+4]
				r, g, bl, a := float64(p[0]), float64(p[1]), float64(p[2]), float64(p[3])
				q := row[4*ox : 4*ox+4 : 4*ox+4]
				if x := float64(x0 + i); x+1 <= edge || ox == dw-1 {
					q[0] += r
					q[1] += g
					q[2] += bl
					q[3] += a
				} else {
					w := edge - x
					q[0] += r * w
					q[1] += g * w
					q[2] += bl * w
					q[3] += a * w
					ox++
					edge = float64(ox+1) * sx
					q = row[4*ox : 4*ox+4 : 4*ox+4]
					w = 1 - w
					q[0] += r * w
					q[1] += g * w
					q[2] += bl * w
					q[3] += a * w
				}
			}
		}
		oy, w := cell(y, sy, dh)
		for oy > base {
			flush()
		}
		addRow(acc, row, w)
		if w < 1 {
			addRow(next, row, 1-w)
		}
	}
	for base < dh {
		flush()
	}
	return dst
}

// shrinkChunk is how many source pixels shrink converts at a time.
const shrinkChunk = 1024

// cell returns the output cell o (of n, each scale ≥ 1 samples wide) where
// source sample i starts, and the fraction w of the sample inside it; the
// rest, 1-w, lies in cell o+1.
func cell(i int, scale float64, n int) (o int, w float64) {
	o = min(int(float64(i)/scale), n-1)
	edge := float64(o+1) * scale
	if edge <= float64(i) && o < n-1 { // i/scale rounded down across an edge
		o++
		edge = float64(o+1) * scale
	}
	if o == n-1 || float64(i+1) <= edge {
		return o, 1
	}
	return o, edge - float64(i)
}

func addRow(dst, src []float64, w float64) {
	for i, v := range src {
		dst[i] += v * w
	}
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
