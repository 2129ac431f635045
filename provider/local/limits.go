package local

import (
	"fmt"
	"math"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/normalize"
	"github.com/pgimageai/pgimageai/provider"
)

// Limits bound what decoding one image may cost, checked from its header
// before any pixel is decoded. The decoders of the standard library and
// x/image allocate the whole image (and more: rows, passes, coefficients),
// so the bound is on the bytes they would allocate, not on pixels alone: a
// 50,000,000 × 1 PNG strip has few pixels and rows of 50 MB.
type Limits struct {
	MaxPixels       int64   // width × height
	MaxSide         int     // the longer side, in pixels
	MaxAspect       float64 // longer side / shorter side
	MaxDecodedBytes int64   // decodedBytes' estimate
	MaxJPEGScans    int     // a JPEG's scans (normalize.JPEGScans); 0 = normalize.DefaultMaxJPEGScans
}

// tooLarge is the error of an image over a limit: a too_large row, never
// retried, since the same bytes would fail again.
func tooLarge(format string, args ...any) error {
	return &provider.Error{Kind: provider.TooLarge, Message: fmt.Sprintf(format, args...) + "; not decoded"}
}

// check refuses an image of format f, w × h pixels per its header, whose
// decoding would pass one of the limits.
func (l Limits) check(f magic.Format, data []byte, w, h int) error {
	long, short := max(w, h), min(w, h)
	switch px := int64(w) * int64(h); {
	case long > l.MaxSide:
		return tooLarge("%s image of %dx%d pixels: its side of %d pixels is over the limit of %d (option max_side)", f, w, h, long, l.MaxSide)
	case float64(long) > l.MaxAspect*float64(short):
		return tooLarge("%s image of %dx%d pixels: its aspect ratio of %.0f:1 is over the limit of %g:1 (option max_aspect)", f, w, h, float64(long)/float64(short), l.MaxAspect)
	case px > l.MaxPixels:
		return tooLarge("%s image of %dx%d pixels (%.1f megapixels) is over the limit of %.1f megapixels (option max_pixels)",
			f, w, h, float64(px)/1e6, float64(l.MaxPixels)/1e6)
	}
	if f == magic.JPEG {
		if err := normalize.CheckJPEG(data, w, h, l.MaxJPEGScans, "max_jpeg_scans"); err != nil {
			return &provider.Error{Kind: provider.TooLarge, Message: err.Error() + "; not decoded", Err: err}
		}
	}
	need := decodedBytes(f, data, w, h)
	if need > l.MaxDecodedBytes {
		return tooLarge("%s image of %dx%d pixels would take %.1f MiB to decode, over the limit of %.1f MiB (option max_decoded_bytes)",
			f, w, h, float64(need)/(1<<20), float64(l.MaxDecodedBytes)/(1<<20))
	}
	return nil
}

// decoderBytes is what a call holds besides the decoded pixels and what
// normalize.DecodedBytes counts for the decoder: shrink's output and
// accumulators.
const decoderBytes = normalize.DecoderBytes + 4*workSize*workSize

// decodedBytes is normalize.DecodedBytes (the decoder's allocations, from the
// header) and shrink's work.
func decodedBytes(f magic.Format, data []byte, w, h int) int64 {
	n := normalize.DecodedBytes(f, data, w, h)
	if n > math.MaxInt64-4*workSize*workSize {
		return n
	}
	return n + 4*workSize*workSize
}
