package normalize

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
	"golang.org/x/image/webp"

	"github.com/pgimageai/pgimageai/internal/wasmdec"
	"github.com/pgimageai/pgimageai/magic"
)

// ErrTooLarge is wrapped by the error of an image whose decode would pass
// Settings.MaxDecodedBytes, or whose coded image is larger than its header
// says, or that has more JPEG scans than Settings.MaxJPEGScans, or whose
// decode ran out of Settings.DecodeTimeout: refused before any pixel is
// decoded (the last, stopped).
var ErrTooLarge = errors.New("too large to decode")

// DecodeError is a decoder's failure: its name and its message.
type DecodeError struct {
	Decoder string // e.g. "libheif and libde265 (WebAssembly)"
	Format  magic.Format
	Err     error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("decode %s with %s: %v", e.Format, e.Decoder, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// decoder is one format's decoder, called explicitly per format rather than
// through image.Decode's global registry. limit bounds what a WebAssembly
// decoder's memory may grow to; the Go decoders are bounded by the header
// checks before them.
type decoder struct {
	name   string
	decode func(ctx context.Context, data []byte, limit int64) (image.Image, error)
}

// goDecoder reads data through ContextReader: the Go decoders read their
// input as they decode (a progressive JPEG scan by scan), so a decode stops
// at its next read after the deadline.
func goDecoder(name string, decode func(io.Reader) (image.Image, error)) decoder {
	return decoder{name, func(ctx context.Context, data []byte, _ int64) (image.Image, error) {
		return decode(ContextReader(ctx, data))
	}}
}

// ContextReader reads data at most 16 KiB at a time and fails with ctx's
// error once ctx is done: a Go decoder reading it stops within 16 KiB of
// input after ctx's end.
func ContextReader(ctx context.Context, data []byte) io.Reader {
	return &ctxReader{ctx: ctx, r: bytes.NewReader(data)}
}

var decoders = map[magic.Format]decoder{
	magic.PNG:  goDecoder("image/png", png.Decode),
	magic.JPEG: goDecoder("image/jpeg", jpeg.Decode),
	magic.GIF:  goDecoder("image/gif", gif.Decode), // the first frame
	magic.WebP: goDecoder("golang.org/x/image/webp", webp.Decode),
	magic.BMP:  goDecoder("golang.org/x/image/bmp", bmp.Decode),
	magic.TIFF: goDecoder("golang.org/x/image/tiff", tiff.Decode),
	magic.HEIF: {"libheif and libde265 (WebAssembly)", wasmdec.HEIF},
	magic.AVIF: {"libavif and libaom (WebAssembly)", wasmdec.AVIF},
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

const ctxChunk = 16 << 10

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	if len(p) > ctxChunk {
		p = p[:ctxChunk]
	}
	return c.r.Read(p)
}

// decoderName names the decoder of f, for messages.
func decoderName(f magic.Format) string {
	if vipsHandles(f) {
		return vipsDecoderName(f)
	}
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
// the byte bound. A WebAssembly decoder's memory may grow to wasm bytes. The
// end of ctx ends the decode: its error is then ctx's.
func decode(ctx context.Context, img []byte, f magic.Format, h header, need, bound, wasm int64) (image.Image, error) {
	if need > bound {
		return nil, fmt.Errorf("%s image of %dx%d pixels would take %.1f MiB to normalise, over the bound of %.1f MiB (option normalize_max_decoded_bytes): %w",
			f, h.width, h.height, float64(need)/(1<<20), float64(bound)/(1<<20), ErrTooLarge)
	}
	d, ok := decoders[f]
	if !ok {
		return nil, &DecodeError{Decoder: "no decoder", Format: f, Err: errors.New("format not supported")}
	}
	m, err := guard(func(io.Reader) (image.Image, error) { return d.decode(ctx, img, wasm) }, nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, wasmdec.ErrMemoryLimit) {
			return nil, fmt.Errorf("decode %s with %s: %w, over what its header allowed for (%.1f MiB); stopped: %w",
				f, d.name, err, float64(wasm)/(1<<20), ErrTooLarge)
		}
		return nil, &DecodeError{Decoder: d.name, Format: f, Err: err}
	}
	if b := m.Bounds(); b.Dx() != h.width || b.Dy() != h.height {
		return nil, &DecodeError{Decoder: d.name, Format: f,
			Err: fmt.Errorf("decoded %dx%d pixels, the header said %dx%d", b.Dx(), b.Dy(), h.width, h.height)}
	}
	return m, nil
}
