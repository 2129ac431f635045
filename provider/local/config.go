package local

import (
	"encoding/json"
	"fmt"
	"runtime"

	"github.com/pgimageai/pgimageai/provider"
)

// DefaultMaxPixels is the largest image, in pixels (width × height), decoded
// when max_pixels is not set: 50 megapixels, about 200 MB of RGBA.
const DefaultMaxPixels = 50_000_000

// Config is models.options for the local provider: the shared keys of
// provider.Options plus max_pixels. Unknown keys are an error, so that a
// misspelt option never goes unnoticed.
//
// Of the shared keys, timeout bounds each call (checked between decoding,
// downscaling and feature extraction; a decode in progress is not
// interrupted), and max_concurrency and requests_per_minute bound the work in
// flight. max_concurrency defaults to the smaller of 8 and GOMAXPROCS, since
// the work is CPU-bound; an explicit value is used as given. max_retries is
// accepted but unused: decoding is deterministic, so a failure is never
// retried. max_image_bytes and formats are enforced by functions before the
// provider is called.
type Config struct {
	provider.Options

	// MaxPixels refuses images whose declared width × height exceeds it,
	// before their pixels are decoded; default DefaultMaxPixels.
	MaxPixels int64 `json:"max_pixels,omitempty"`
}

// Validate reports the first invalid option.
func (c Config) Validate() error {
	if err := c.Options.Validate(); err != nil {
		return err
	}
	if c.MaxPixels < 0 {
		return fmt.Errorf("option max_pixels: must be >= 1, got %d", c.MaxPixels)
	}
	return nil
}

// ParseConfig decodes models.options strictly (an unknown key is an error
// naming it), validates it and applies the defaults.
func ParseConfig(raw json.RawMessage) (Config, error) {
	var c Config
	if err := provider.DecodeStrict(raw, &c); err != nil {
		return Config{}, err
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	if c.MaxConcurrency == 0 {
		c.MaxConcurrency = min(provider.DefaultMaxConcurrency, runtime.GOMAXPROCS(0))
	}
	c.Options = c.Options.WithDefaults()
	if c.MaxPixels == 0 {
		c.MaxPixels = DefaultMaxPixels
	}
	return c, nil
}
