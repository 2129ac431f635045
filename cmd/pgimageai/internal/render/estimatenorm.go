package render

import (
	"fmt"
	"image"
	"math"
)

// NormEstimate is what normalisation changes in an estimate: the sizes
// sent, and the bytes and tokens with and without it.
type NormEstimate struct {
	Enabled      bool
	Sizes        []image.Point // as sent, one per scanned size
	StoredBytes  float64       // average of an image, as stored
	SentBytes    float64       // average, about: stored bytes scaled by the pixels kept
	StoredTokens float64       // average input tokens of an image as stored; NaN or 0: unknown
}

func (n NormEstimate) String() string {
	if !n.Enabled {
		return "Normalisation: off (option normalize): images are sent as stored\n"
	}
	s := fmt.Sprintf("Normalisation: on; an image averages %.0f bytes stored, about %.0f sent", n.StoredBytes, n.SentBytes)
	if !math.IsNaN(n.StoredTokens) && n.StoredTokens > 0 {
		s += fmt.Sprintf("; input tokens %.0f an image as stored, as below after normalisation", n.StoredTokens)
	}
	return s + "\n"
}
