package local

import "math"

// zigzag lists the first dctLen AC frequencies (u, v) of a dctSize × dctSize
// DCT, by increasing u+v and alternating direction as in JPEG.
var zigzag = func() [][2]int {
	var z [][2]int
	for s := 1; len(z) < dctLen; s++ {
		for k := 0; k <= s && len(z) < dctLen; k++ {
			u := k
			if s%2 == 0 {
				u = s - k
			}
			z = append(z, [2]int{u, s - u})
		}
	}
	return z
}()

// dctBasis[k][x] is the orthonormal DCT-II basis: α(k)·cos(π(2x+1)k / 2N),
// for the frequencies zigzag uses.
var dctBasis = func() [][]float64 {
	maxK := 0
	for _, f := range zigzag {
		maxK = max(maxK, f[0], f[1])
	}
	b := make([][]float64, maxK+1)
	for k := range b {
		b[k] = make([]float64, dctSize)
		a := math.Sqrt(2.0 / dctSize)
		if k == 0 {
			a = math.Sqrt(1.0 / dctSize)
		}
		for x := range dctSize {
			b[k][x] = a * math.Cos(math.Pi*float64((2*x+1)*k)/(2*dctSize))
		}
	}
	return b
}()

// dct returns the zigzag AC coefficients of the 2-D DCT of the dctSize ×
// dctSize grid g: its low-frequency structure, independent of mean
// brightness.
func dct(g []float64) []float64 {
	// rows first: r[y][u] = Σx g[y][x]·basis[u][x]
	nu := len(dctBasis)
	rows := make([]float64, dctSize*nu)
	for y := range dctSize {
		line := g[y*dctSize : (y+1)*dctSize]
		for u, bu := range dctBasis {
			var s float64
			for x, e := range line {
				s += e * bu[x]
			}
			rows[y*nu+u] = s
		}
	}
	out := make([]float64, len(zigzag))
	for i, f := range zigzag {
		u, v := f[0], f[1]
		var s float64
		for y, e := range dctBasis[v] {
			s += rows[y*nu+u] * e
		}
		out[i] = s
	}
	return out
}

// edges returns, for each quadrant of the gridSize × gridSize luma grid g,
// the mean Sobel gradient magnitude in edgeBins orientation bins over [0, π),
// each gradient split between its two nearest bins.
func edges(g []float64) []float64 {
	const n, half = gridSize, gridSize / 2
	out := make([]float64, edgeLen)
	at := func(x, y int) float64 { return g[y*n+x] }
	for y := 1; y < n-1; y++ {
		for x := 1; x < n-1; x++ {
			gx := (at(x+1, y-1) + 2*at(x+1, y) + at(x+1, y+1) - at(x-1, y-1) - 2*at(x-1, y) - at(x-1, y+1)) / 8
			gy := (at(x-1, y+1) + 2*at(x, y+1) + at(x+1, y+1) - at(x-1, y-1) - 2*at(x, y-1) - at(x+1, y-1)) / 8
			mag := math.Hypot(gx, gy)
			if mag == 0 {
				continue
			}
			theta := math.Atan2(gy, gx)
			if theta < 0 {
				theta += math.Pi
			}
			pos := theta / math.Pi * edgeBins // bin i centred on i·π/edgeBins
			i := int(pos)
			f := pos - float64(i)
			q := (y/half*2 + x/half) * edgeBins
			out[q+i%edgeBins] += mag * (1 - f)
			out[q+(i+1)%edgeBins] += mag * f
		}
	}
	const cellPixels = (half - 1) * (half - 1)
	for i := range out {
		out[i] /= cellPixels
	}
	return out
}
