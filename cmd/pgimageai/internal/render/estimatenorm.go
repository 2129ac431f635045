package render

import (
	"fmt"
	"math"

	"github.com/pgimageai/pgimageai/cmd/pgimageai/internal/estimate"
)

// normText says what normalisation changes.
func normText(n *estimate.Norm) string {
	if !n.Enabled {
		return "Normalisation: off (option normalize): images are sent as stored\n"
	}
	s := fmt.Sprintf("Normalisation: on; an image averages %.0f bytes stored, about %.0f sent", n.StoredBytes, n.SentBytes)
	if !math.IsNaN(n.StoredTokens) && n.StoredTokens > 0 {
		s += fmt.Sprintf("; input tokens %.0f an image as stored, as below after normalisation", n.StoredTokens)
	}
	return s + "\n"
}
