package main

import (
	"image"
	"math"

	"github.com/pgimageai/pgimageai/cmd/pgimageai/internal/render"
	"github.com/pgimageai/pgimageai/provider"
)

// normalizedSizes sends the scanned sizes through the model's size rule,
// as its provider states it (provider.Options.SentSize).
func normalizedSizes(p provider.Provider, opts provider.Options, scan *render.ImageScan) render.NormEstimate {
	n := render.NormEstimate{Enabled: opts.Normalize == nil || *opts.Normalize, StoredTokens: math.NaN()}
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
