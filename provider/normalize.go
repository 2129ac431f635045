package provider

import (
	"fmt"
	"time"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/normalize"
)

// NormalizeOptions are the keys of models.options that say how an image is
// normalised before it is sent (package normalize): on by default.
type NormalizeOptions struct {
	// Normalize turns the normalisation on (default) or off: off, every
	// image is sent as stored and a format the model does not take is an
	// unsupported_format row.
	Normalize *bool `json:"normalize,omitempty"`
	// NormalizeMaxSide replaces the provider's longest-side bound: an image
	// is scaled to fit in N × N pixels. 0 = the provider's rule.
	NormalizeMaxSide int `json:"normalize_max_side,omitempty"`
	// NormalizeMaxPixels replaces the provider's pixel-count bound. 0 = the
	// provider's rule.
	NormalizeMaxPixels int64 `json:"normalize_max_pixels,omitempty"`
	// JPEGQuality is the quality of a re-encoded JPEG; default 90.
	JPEGQuality int `json:"jpeg_quality,omitempty"`
	// NormalizeMaxDecodedBytes bounds what normalising one image may
	// allocate, estimated from its header; default 320 MiB.
	NormalizeMaxDecodedBytes int64 `json:"normalize_max_decoded_bytes,omitempty"`
	// NormalizeMaxJPEGScans refuses a JPEG with more scans before it is
	// decoded; default normalize.DefaultMaxJPEGScans (100).
	NormalizeMaxJPEGScans int `json:"normalize_max_jpeg_scans,omitempty"`
	// NormalizeDecodeTimeout ends the normalisation of one image that takes
	// longer; default normalize.DefaultDecodeTimeout (30s).
	NormalizeDecodeTimeout Duration `json:"normalize_decode_timeout,omitempty"`
}

// Validate reports the first invalid normalisation option.
func (o NormalizeOptions) Validate() error {
	switch {
	case o.NormalizeMaxSide < 0:
		return fmt.Errorf("option normalize_max_side: must be >= 1 (0: the provider's rule), got %d", o.NormalizeMaxSide)
	case o.NormalizeMaxPixels < 0:
		return fmt.Errorf("option normalize_max_pixels: must be >= 1 (0: the provider's rule), got %d", o.NormalizeMaxPixels)
	case o.JPEGQuality < 0 || o.JPEGQuality > 100:
		return fmt.Errorf("option jpeg_quality: must be 1–100, got %d", o.JPEGQuality)
	case o.NormalizeMaxDecodedBytes < 0:
		return fmt.Errorf("option normalize_max_decoded_bytes: must be >= 1, got %d", o.NormalizeMaxDecodedBytes)
	case o.NormalizeMaxJPEGScans < 0:
		return fmt.Errorf("option normalize_max_jpeg_scans: must be >= 1, got %d", o.NormalizeMaxJPEGScans)
	case o.NormalizeDecodeTimeout < 0:
		return fmt.Errorf("option normalize_decode_timeout: must be positive, got %s", time.Duration(o.NormalizeDecodeTimeout))
	}
	return nil
}

// ImageSizer is implemented by a provider whose models document what size
// of image they look at (OpenAI's detail, Voyage's and Cohere's pixel
// rules). A provider without it gets normalize.MaxSide.
type ImageSizer interface {
	ImageSize() normalize.Size
}

// Normalization returns the normalisation settings of a model with options
// o (WithDefaults applied) served by p.
func (o Options) Normalization(p Provider) normalize.Settings {
	s := normalize.Settings{
		Enabled:         o.Normalize == nil || *o.Normalize,
		Size:            normalize.MaxSide,
		JPEGQuality:     o.JPEGQuality,
		MaxDecodedBytes: o.NormalizeMaxDecodedBytes,
		MaxJPEGScans:    o.NormalizeMaxJPEGScans,
		DecodeTimeout:   time.Duration(o.NormalizeDecodeTimeout),
	}
	if sz, ok := p.(ImageSizer); ok {
		s.Size = sz.ImageSize()
	}
	if o.NormalizeMaxSide > 0 {
		s.Size.MaxSide = o.NormalizeMaxSide
	}
	if o.NormalizeMaxPixels > 0 {
		s.Size.MaxPixels = o.NormalizeMaxPixels
	}
	for _, m := range o.Formats {
		if f, ok := magic.ParseMIME(m); ok {
			s.Accept = append(s.Accept, f)
		}
	}
	return s
}
