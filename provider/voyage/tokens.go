package voyage

import (
	"bytes"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"strconv"

	"golang.org/x/image/webp"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/provider"
)

// Token limits of the multimodal endpoint
// (https://docs.voyageai.com/docs/multimodal-embeddings): an image costs a
// token per 560 pixels, an input at most 32,000 tokens, a request at most
// 320,000 tokens in total. 32 twelve-megapixel photos (about 686,000
// tokens) are refused together, so batches are packed by estimated tokens.
const (
	PixelsPerToken   = 560
	MaxInputTokens   = 32_000
	MaxRequestTokens = 320_000
)

// imageTokens estimates the tokens of an image from its dimensions, read
// from the header only (image.DecodeConfig: no pixels are decoded). An
// image whose header cannot be read (or whose decoder panics on it) counts
// as MaxInputTokens, the most one input may cost.
func imageTokens(f magic.Format, data []byte) (tokens int) {
	defer func() {
		if recover() != nil {
			tokens = MaxInputTokens
		}
	}()
	var decodeConfig func(io.Reader) (image.Config, error)
	switch f {
	case magic.PNG:
		decodeConfig = png.DecodeConfig
	case magic.JPEG:
		decodeConfig = jpeg.DecodeConfig
	case magic.GIF:
		decodeConfig = gif.DecodeConfig
	case magic.WebP:
		decodeConfig = webp.DecodeConfig
	default:
		return MaxInputTokens
	}
	c, err := decodeConfig(bytes.NewReader(data))
	if err != nil || c.Width <= 0 || c.Height <= 0 {
		return MaxInputTokens
	}
	pixels := int64(c.Width) * int64(c.Height)
	return int(min((pixels+PixelsPerToken-1)/PixelsPerToken, MaxRequestTokens+1))
}

// ImageTokenRule is Voyage's rule (provider.ImageTokenCounter): a token per
// PixelsPerToken pixels of the image as sent, rounded up.
func (p *Provider) ImageTokenRule() (provider.TokenRule, bool) {
	return provider.TokenRule{Name: "Voyage's rule: 1 token per " + strconv.Itoa(PixelsPerToken) + " pixels", Tokens: func(w, h int) int64 {
		return (int64(w)*int64(h) + PixelsPerToken - 1) / PixelsPerToken
	}}, true
}
