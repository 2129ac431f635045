package local

import (
	"image"
	"math"
)

// Dimensions is the length of every vector EmbedImage returns: 128 float32
// values of unit L2 norm, so that a dot product is the cosine similarity.
// They are four blocks, each L2-normalised on its own and then weighted, so
// that no block dominates:
//
//	[0, 48)    colour layout: mean Y−½, Cb, Cr of a 4×4 grid (weight 0.30)
//	[48, 64)   colour histogram: 12 soft hue bins weighted by chroma and
//	           4 soft grey levels weighted by its complement, as square
//	           roots of shares (weight 0.20)
//	[64, 112)  structure: the first 48 AC coefficients, in zigzag order, of
//	           the orthonormal 2-D DCT of a 32×32 luma grid (weight 0.35)
//	[112, 128) edges: Sobel gradient energy in 4 soft orientation bins for
//	           each quadrant of a 64×64 luma grid (weight 0.15)
//
// Transparent pixels are composited over white, and every grid is an exact
// area average, which makes the vector stable under resizing and lossy
// re-encoding. The weights are squared-norm shares; a block whose raw norm
// is below its noise floor (a flat image has no structure) is scaled down
// rather than blown up, and the whole vector is normalised last.
const Dimensions = layoutLen + histLen + dctLen + edgeLen

const (
	gridSize  = 64 // the canonical grid the layout, DCT and edges start from
	layoutLen = 4 * 4 * 3
	hues      = 12
	greys     = 4
	histLen   = hues + greys
	dctSize   = gridSize / 2
	dctLen    = 48
	edgeBins  = 4
	edgeLen   = 2 * 2 * edgeBins
)

// block is one part of the vector: its weight (share of the squared norm) and
// the raw norm under which it is not normalised up to full weight.
type block struct {
	weight, floor float64
}

var (
	layoutBlock = block{weight: 0.30, floor: 0.05}
	histBlock   = block{weight: 0.20, floor: 0}
	dctBlock    = block{weight: 0.35, floor: 0.3}
	edgeBlock   = block{weight: 0.15, floor: 0.02}
)

// embed computes the vector of a small copy (see Dimensions).
func embed(m *image.RGBA) []float32 {
	planes, hist := colourPlanes(m)
	grid := [3][]float64{}
	for c := range planes {
		grid[c] = areaResample(planes[c], m.Rect.Dx(), m.Rect.Dy(), gridSize)
	}

	v := make([]float64, 0, Dimensions)
	v = appendBlock(v, layout(grid), layoutBlock)
	v = appendBlock(v, hist, histBlock)
	v = appendBlock(v, dct(halve(grid[0], gridSize)), dctBlock)
	v = appendBlock(v, edges(grid[0]), edgeBlock)

	var norm float64
	for _, x := range v {
		norm += x * x
	}
	norm = math.Sqrt(norm) // > 0: the histogram block always has full weight
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x / norm)
	}
	return out
}

// appendBlock appends x scaled to norm √weight, or less when x's norm is
// below the block's floor.
func appendBlock(v, x []float64, b block) []float64 {
	var norm float64
	for _, e := range x {
		norm += e * e
	}
	norm = math.Sqrt(norm)
	scale := math.Sqrt(b.weight) / max(norm, b.floor, 1e-12)
	for _, e := range x {
		v = append(v, e*scale)
	}
	return v
}

// colourPlanes returns the Y, Cb and Cr planes (0..1, −½..½) of m composited
// over white, and its colour histogram as square roots of shares.
func colourPlanes(m *image.RGBA) ([3][]float64, []float64) {
	w, h := m.Rect.Dx(), m.Rect.Dy()
	var planes [3][]float64
	for c := range planes {
		planes[c] = make([]float64, w*h)
	}
	hist := make([]float64, histLen)
	for y := range h {
		row := m.Pix[y*m.Stride : y*m.Stride+4*w]
		for x := range w {
			p := row[4*x : 4*x+4]
			white := 255 - float64(p[3]) // premultiplied: compositing adds the uncovered share
			r := min((float64(p[0])+white)/255, 1)
			g := min((float64(p[1])+white)/255, 1)
			b := min((float64(p[2])+white)/255, 1)
			lum := 0.299*r + 0.587*g + 0.114*b
			i := y*w + x
			planes[0][i] = lum
			planes[1][i] = 0.564 * (b - lum)
			planes[2][i] = 0.713 * (r - lum)
			addColour(hist, r, g, b, lum)
		}
	}
	for i := range hist {
		hist[i] = math.Sqrt(hist[i] / float64(w*h))
	}
	return planes, hist
}

// addColour spreads one pixel's unit weight over the histogram: its chroma
// between the two hue bins nearest its hue (bin i centred on 30°·i), the rest
// between the two grey levels nearest its luma.
func addColour(hist []float64, r, g, b, lum float64) {
	mx, mn := max(r, g, b), min(r, g, b)
	c := mx - mn
	if c > 1e-9 {
		var h float64 // in sixths of a turn, [0, 6)
		switch mx {
		case r:
			h = math.Mod((g-b)/c+6, 6)
		case g:
			h = (b-r)/c + 2
		default:
			h = (r-g)/c + 4
		}
		pos := h * hues / 6
		i := int(pos)
		f := pos - float64(i)
		hist[i%hues] += c * (1 - f)
		hist[(i+1)%hues] += c * f
	}
	pos := lum * (greys - 1)
	i := min(int(pos), greys-2)
	f := pos - float64(i)
	hist[hues+i] += (1 - c) * (1 - f)
	hist[hues+i+1] += (1 - c) * f
}

// areaResample returns the n × n grid of exact area averages of the w × h
// plane p: each output cell is the mean of the input it covers, fractions of
// pixels included, whether it shrinks or enlarges.
func areaResample(p []float64, w, h, n int) []float64 {
	tx, ty := boxTaps(w, n), boxTaps(h, n)
	tmp := make([]float64, n*h) // rows resampled: n wide, h high
	for y := range h {
		row := p[y*w : y*w+w]
		for o, taps := range tx {
			var s float64
			for _, t := range taps {
				s += row[t.i] * t.w
			}
			tmp[y*n+o] = s
		}
	}
	out := make([]float64, n*n)
	for o, taps := range ty {
		for x := range n {
			var s float64
			for _, t := range taps {
				s += tmp[t.i*n+x] * t.w
			}
			out[o*n+x] = s
		}
	}
	return out
}

// halve averages 2 × 2 cells of the n × n grid g.
func halve(g []float64, n int) []float64 {
	h := n / 2
	out := make([]float64, h*h)
	for y := range h {
		for x := range h {
			i := 2*y*n + 2*x
			out[y*h+x] = (g[i] + g[i+1] + g[i+n] + g[i+n+1]) / 4
		}
	}
	return out
}

// layout returns Y−½, Cb and Cr averaged over each cell of a 4 × 4 grid.
func layout(grid [3][]float64) []float64 {
	const cell = gridSize / 4
	out := make([]float64, 0, layoutLen)
	for cy := range 4 {
		for cx := range 4 {
			for c, p := range grid {
				var s float64
				for y := cy * cell; y < (cy+1)*cell; y++ {
					for x := cx * cell; x < (cx+1)*cell; x++ {
						s += p[y*gridSize+x]
					}
				}
				s /= cell * cell
				if c == 0 {
					s -= 0.5
				}
				out = append(out, s)
			}
		}
	}
	return out
}
