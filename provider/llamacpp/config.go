package llamacpp

import (
	"encoding/json"
	"fmt"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/httpjson"
)

// Batch sizes: the default, and the most accepted (llama-server embeds the
// inputs of a request one after another within its batch/ubatch budget, so
// very large requests only add latency).
const (
	DefaultBatchSize = 16
	MaxBatchSize     = 256
)

// The request shapes of an input (request_shape).
const (
	// ShapeAuto asks GET /props: multimodal_data with the server's
	// media_marker, or the literal DefaultMarker when /props names none;
	// content when the server has no /props (a proxy serving /v1 only).
	ShapeAuto = ""
	// ShapeContent is {"content":[{"type":"image_url",…},{"type":"text",…}]},
	// documented for /v1/embeddings by the newest server README.
	ShapeContent = "content"
	// ShapeMultimodalData is {"prompt_string":MARKER+text,
	// "multimodal_data":[BASE64]}, taken by builds since PR #15108 (Aug 2025).
	ShapeMultimodalData = "multimodal_data"
)

// DefaultMarker is the media marker of builds whose /props has no
// media_marker (before PR #21962, April 2026, which made it random per start).
const DefaultMarker = "<__media__>"

// DefaultText follows the image in every input: a prompt that ends with the
// image aborts llama-server (GGML_ASSERT(batch.size() > 0), seen on build
// b11669 with a model that adds no EOS token), since no text token is left
// to decode after the image chunk.
const DefaultText = "\n"

// DefaultFormats are the formats llama.cpp decodes (stb_image: PNG, JPEG,
// GIF; also BMP and TGA, which pgimageai does not detect). WebP is not among
// them: a WebP would fail its whole batch with HTTP 500.
var DefaultFormats = []string{magic.PNG.MIME(), magic.JPEG.MIME(), magic.GIF.MIME()}

// Config is models.options for the llamacpp provider: those of
// httpjson.EmbedConfig, request_shape and text. Unknown keys are an error.
type Config struct {
	httpjson.EmbedConfig

	// RequestShape is how an image is sent: ShapeAuto (default),
	// ShapeContent or ShapeMultimodalData.
	RequestShape string `json:"request_shape,omitempty"`
	// Text follows the image in each input; default DefaultText.
	Text string `json:"text,omitempty"`
}

// Validate reports the first invalid option.
func (c Config) Validate() error {
	if err := c.EmbedConfig.Validate(MaxBatchSize); err != nil {
		return err
	}
	switch c.RequestShape {
	case ShapeAuto, ShapeContent, ShapeMultimodalData:
	default:
		return fmt.Errorf("option request_shape: must be %q or %q (or unset: ask GET /props), got %q", ShapeContent, ShapeMultimodalData, c.RequestShape)
	}
	return nil
}

// ParseConfig decodes models.options strictly (an unknown key is an error
// naming it), validates it and applies the defaults, DefaultFormats when
// formats is unset.
func ParseConfig(raw json.RawMessage) (Config, error) {
	c, err := provider.DecodeConfig[Config](raw)
	if err != nil {
		return Config{}, err
	}
	if len(c.Formats) == 0 {
		c.Formats = DefaultFormats
	}
	c.EmbedConfig = c.EmbedConfig.WithDefaults(DefaultBatchSize)
	c.Options = c.Options.SelfHostedOr(true) // llama-server is the operator's
	if c.Text == "" {
		c.Text = DefaultText
	}
	return c, nil
}
