package local

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"

	"golang.org/x/image/webp"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/normalize"
	"github.com/pgimageai/pgimageai/provider"
)

// workSize is the long side, in pixels, of the copy every description and
// feature is computed from.
const workSize = 256

// picture is a decoded image reduced to what the provider needs.
type picture struct {
	format        magic.Format
	width, height int         // of the image as declared by its header
	small         *image.RGBA // at most workSize on the long side, origin (0, 0)
}

// codec is one format's decoder pair, called explicitly per MIME type rather
// than through image.Decode's global registry.
type codec struct {
	config func(io.Reader) (image.Config, error)
	decode func(io.Reader) (image.Image, error)
}

var codecs = map[magic.Format]codec{
	magic.PNG:  {png.DecodeConfig, png.Decode},
	magic.JPEG: {jpeg.DecodeConfig, jpeg.Decode},
	magic.GIF:  {gif.DecodeConfig, gif.Decode}, // the first frame
	magic.WebP: {webp.DecodeConfig, webp.Decode},
}

// load decodes img, refusing it before decoding any pixel when its header
// passes one of the limits (a TooLarge *provider.Error), and downscales it.
// Decoding failures are permanent *provider.Error values carrying the
// decoder's message; the end of ctx, checked between the stages, is returned
// as ctx's error.
func load(ctx context.Context, img provider.Image, limits Limits) (picture, error) {
	f, ok := magic.ParseMIME(img.MIME)
	if !ok {
		return picture{}, provider.Errorf(provider.Permanent,
			"image type %q is not one of image/png, image/jpeg, image/gif, image/webp", img.MIME)
	}
	c := codecs[f]
	cfg, err := guard(c.config, img.Data)
	if err != nil {
		return picture{}, decodeError(f, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return picture{}, provider.Errorf(provider.Permanent, "decode %s: image has no pixels (%dx%d)", f, cfg.Width, cfg.Height)
	}
	if err := limits.check(f, img.Data, cfg.Width, cfg.Height); err != nil {
		return picture{}, err
	}
	// The decoder reads through a reader that fails once ctx is done, so a
	// decode stops at the call's deadline.
	m, err := guard(func(io.Reader) (image.Image, error) { return c.decode(normalize.ContextReader(ctx, img.Data)) }, nil)
	if err != nil {
		if ctx.Err() != nil {
			return picture{}, ctx.Err()
		}
		return picture{}, decodeError(f, err)
	}
	if m.Bounds().Empty() {
		return picture{}, provider.Errorf(provider.Permanent, "decode %s: image has no pixels", f)
	}
	if err := ctx.Err(); err != nil {
		return picture{}, err
	}
	small := shrink(m)
	if err := ctx.Err(); err != nil {
		return picture{}, err
	}
	return picture{format: f, width: cfg.Width, height: cfg.Height, small: small}, nil
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

func decodeError(f magic.Format, err error) error {
	return &provider.Error{Kind: provider.Permanent, Message: "decode " + f.String() + ": " + err.Error(), Err: err}
}
