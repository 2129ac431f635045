package estimate

import (
	"image"
	"math"

	"github.com/pgimageai/pgimageai/provider"
)

// Norm is what normalisation changes in an estimate: the sizes sent, and
// the bytes and tokens with and without it.
type Norm struct {
	Enabled      bool
	Sizes        []image.Point // as sent, one per scanned size
	StoredBytes  float64       // average of an image, as stored
	SentBytes    float64       // average, about: stored bytes scaled by the pixels kept
	StoredTokens float64       // average input tokens of an image as stored; NaN or 0: unknown
}

// Normalized sends the scanned sizes through the model's size rule, as its
// provider states it (provider.Options.SentSize).
func Normalized(p provider.Provider, opts provider.Options, scan Scan) Norm {
	n := Norm{Enabled: opts.Normalize == nil || *opts.Normalize, StoredTokens: math.NaN()}
	var stored, sent float64
	for i, sz := range scan.Sizes {
		w, h := opts.SentSize(p, sz.X, sz.Y)
		n.Sizes = append(n.Sizes, image.Pt(w, h))
		if i < len(scan.Bytes) {
			b := float64(scan.Bytes[i])
			stored += b
			sent += b * float64(w) * float64(h) / (float64(sz.X) * float64(sz.Y))
		}
	}
	if k := len(scan.Bytes); k > 0 {
		n.StoredBytes, n.SentBytes = stored/float64(k), sent/float64(k)
	}
	return n
}
