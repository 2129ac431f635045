package normalize

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"

	"github.com/gen2brain/avif"
	"github.com/gen2brain/heic"
	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
	"golang.org/x/image/webp"

	"github.com/pgimageai/pgimageai/magic"
)

// ErrTooLarge is wrapped by the error of an image whose decode would pass
// Settings.MaxDecodedBytes: refused before any pixel is decoded.
var ErrTooLarge = errors.New("decode would pass the byte bound")

// DecodeError is a decoder's failure: its name and its message.
type DecodeError struct {
	Decoder string // e.g. "github.com/gen2brain/heic"
	Format  magic.Format
	Err     error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("decode %s with %s: %v", e.Format, e.Decoder, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// decoder is one format's decoder, called explicitly per format rather than
// through image.Decode's global registry.
type decoder struct {
	name   string
	decode func(io.Reader) (image.Image, error)
}

var decoders = map[magic.Format]decoder{
	magic.PNG:  {"image/png", png.Decode},
	magic.JPEG: {"image/jpeg", jpeg.Decode},
	magic.GIF:  {"image/gif", gif.Decode}, // the first frame
	magic.WebP: {"golang.org/x/image/webp", webp.Decode},
	magic.BMP:  {"golang.org/x/image/bmp", bmp.Decode},
	magic.TIFF: {"golang.org/x/image/tiff", tiff.Decode},
	magic.HEIF: {"github.com/gen2brain/heic", heic.Decode}, // libheif and libde265 in WebAssembly
	magic.AVIF: {"github.com/gen2brain/avif", avif.Decode}, // libavif and dav1d in WebAssembly
}

// decoderName names the decoder of f, for messages.
func decoderName(f magic.Format) string {
	if d, ok := decoders[f]; ok {
		return d.name
	}
	return "no decoder"
}

// guard calls a decoder on data, turning a panic into an error: one
// malformed image in a row must not bring down the service, which would meet
// the same row again after a restart.
func guard[T any](decode func(io.Reader) (T, error), data []byte) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decoder panicked: %v", r)
		}
	}()
	return decode(bytes.NewReader(data))
}

// decode decodes img, whose header said h, after checking that it is within
// the byte bound.
func decode(img []byte, f magic.Format, h header, need, bound int64) (image.Image, error) {
	if need > bound {
		return nil, fmt.Errorf("%s image of %dx%d pixels would take %.1f MiB to normalise, over the bound of %.1f MiB (option normalize_max_decoded_bytes): %w",
			f, h.width, h.height, float64(need)/(1<<20), float64(bound)/(1<<20), ErrTooLarge)
	}
	d, ok := decoders[f]
	if !ok {
		return nil, &DecodeError{Decoder: "no decoder", Format: f, Err: errors.New("format not supported")}
	}
	m, err := guard(d.decode, img)
	if err != nil {
		return nil, &DecodeError{Decoder: d.name, Format: f, Err: err}
	}
	if b := m.Bounds(); b.Dx() != h.width || b.Dy() != h.height {
		return nil, &DecodeError{Decoder: d.name, Format: f,
			Err: fmt.Errorf("decoded %dx%d pixels, the header said %dx%d", b.Dx(), b.Dy(), h.width, h.height)}
	}
	return m, nil
}
