package local

import (
	"encoding/json"
	"fmt"
	"runtime"

	"github.com/pgimageai/pgimageai/normalize"
	"github.com/pgimageai/pgimageai/provider"
)

// Defaults of the decoding limits (see Limits).
const (
	// DefaultMaxPixels is the largest image, in pixels (width × height),
	// decoded when max_pixels is not set: 50 megapixels.
	DefaultMaxPixels = 50_000_000
	// DefaultMaxSide is the longest side decoded: 16384 pixels, WebP's own
	// limit.
	DefaultMaxSide = 16384
	// DefaultMaxAspect is the most elongated image decoded: 1000:1, a
	// hundred times a panorama's. A strip beyond it is no picture to
	// describe, and the shape of decompression bombs.
	DefaultMaxAspect = 1000
	// DefaultMaxDecodedBytes bounds the bytes decoding one image may
	// allocate: 48 MiB, so that a call stays under 64 MiB whatever the
	// image (a 12-megapixel RGBA PNG, a 33-megapixel baseline JPEG, a
	// 6.7-megapixel progressive one).
	DefaultMaxDecodedBytes = 48 << 20
	// defaultMaxConcurrency bounds the images decoded at once when
	// max_concurrency is not set (and by GOMAXPROCS): the local provider's
	// work is this process's CPU, which a fixed bound serves better than an
	// adaptive one.
	defaultMaxConcurrency = 8
)

// Config is models.options for the local provider: the shared keys of
// provider.Options plus max_pixels. Unknown keys are an error, so that a
// misspelt option never goes unnoticed.
//
// Of the shared keys, timeout bounds each call (a decode stops at its next
// read of 16 KiB of the image after the deadline; downscaling and feature
// extraction are checked between), and max_concurrency and requests_per_minute bound the work in
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
	// MaxSide refuses images whose longer side exceeds it; default
	// DefaultMaxSide.
	MaxSide int `json:"max_side,omitempty"`
	// MaxAspect refuses images whose longer side is more than MaxAspect
	// times the shorter; default DefaultMaxAspect.
	MaxAspect float64 `json:"max_aspect,omitempty"`
	// MaxDecodedBytes refuses images whose decoding would allocate more,
	// estimated from the header by format and colour model; default
	// DefaultMaxDecodedBytes. Each call in flight (max_concurrency) may
	// take this much.
	MaxDecodedBytes int64 `json:"max_decoded_bytes,omitempty"`
	// MaxJPEGScans refuses a JPEG with more scans (a progressive file's
	// decode goes over the whole image once a scan); default
	// normalize.DefaultMaxJPEGScans (100).
	MaxJPEGScans int `json:"max_jpeg_scans,omitempty"`
}

// Limits returns the decoding limits of the options.
func (c Config) Limits() Limits {
	return Limits{MaxPixels: c.MaxPixels, MaxSide: c.MaxSide, MaxAspect: c.MaxAspect, MaxDecodedBytes: c.MaxDecodedBytes, MaxJPEGScans: c.MaxJPEGScans}
}

// Validate reports the first invalid option.
func (c Config) Validate() error {
	if err := c.Options.Validate(); err != nil {
		return err
	}
	switch {
	case c.MaxPixels < 0:
		return fmt.Errorf("option max_pixels: must be >= 1, got %d", c.MaxPixels)
	case c.MaxSide < 0:
		return fmt.Errorf("option max_side: must be >= 1, got %d", c.MaxSide)
	case c.MaxAspect < 0 || (c.MaxAspect > 0 && c.MaxAspect < 1):
		return fmt.Errorf("option max_aspect: must be >= 1, got %g", c.MaxAspect)
	case c.MaxDecodedBytes < 0:
		return fmt.Errorf("option max_decoded_bytes: must be >= 1, got %d", c.MaxDecodedBytes)
	case c.MaxJPEGScans < 0:
		return fmt.Errorf("option max_jpeg_scans: must be >= 1, got %d", c.MaxJPEGScans)
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
		c.MaxConcurrency = min(defaultMaxConcurrency, runtime.GOMAXPROCS(0))
	}
	c.Options = c.Options.WithDefaults()
	if c.MaxPixels == 0 {
		c.MaxPixels = DefaultMaxPixels
	}
	if c.MaxSide == 0 {
		c.MaxSide = DefaultMaxSide
	}
	if c.MaxAspect == 0 {
		c.MaxAspect = DefaultMaxAspect
	}
	if c.MaxDecodedBytes == 0 {
		c.MaxDecodedBytes = DefaultMaxDecodedBytes
	}
	if c.MaxJPEGScans == 0 {
		c.MaxJPEGScans = normalize.DefaultMaxJPEGScans
	}
	return c, nil
}
