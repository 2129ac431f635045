package wasmdec

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"image"
	"image/color"
)

//go:embed lib/heif.wasm.gz
var heifWasm []byte

var heif = &module{gz: heifWasm}

// libheif's enum values (libheif/heif.h), as lib/heif.c reports them.
const (
	heifColorspaceYCbCr      = 0
	heifColorspaceRGB        = 1
	heifColorspaceMonochrome = 2
	heifChroma420            = 1
	heifChroma422            = 2
	heifChroma444            = 3
)

// ErrDecode is wrapped by the error of a file the decoder refused.
var ErrDecode = errors.New("the decoder refused the file")

// HEIFConfig reads the primary image's size and colour model of a HEIF
// file, decoding no pixel, in an instance of at most limit bytes.
func HEIFConfig(ctx context.Context, data []byte, limit int64) (image.Config, error) {
	c, _, err := decodeHEIF(ctx, data, limit, true)
	return c, err
}

// HEIF decodes the primary image of a HEIF file in an instance of at most
// limit bytes of linear memory, ended when ctx is done: a *image.YCbCr,
// *image.Gray, *image.RGBA or *image.NRGBA in Go memory.
func HEIF(ctx context.Context, data []byte, limit int64) (image.Image, error) {
	_, m, err := decodeHEIF(ctx, data, limit, false)
	return m, err
}

func decodeHEIF(ctx context.Context, data []byte, limit int64, configOnly bool) (image.Config, image.Image, error) {
	var cfg image.Config
	if err := ctx.Err(); err != nil {
		return cfg, nil, err
	}
	in, err := heif.instantiate(ctx, limit)
	if err != nil {
		return cfg, nil, err
	}
	defer in.close(ctx)
	inPtr, err := in.malloc(ctx, uint64(len(data)))
	if err != nil {
		return cfg, nil, err
	}
	if err := in.write(inPtr, data); err != nil {
		return cfg, nil, err
	}
	out, err := in.malloc(ctx, 4*5)
	if err != nil {
		return cfg, nil, err
	}
	wp, hp, csp, chp, pmp := out, out+4, out+8, out+12, out+16
	ok, err := in.call(ctx, "decode", uint64(inPtr), uint64(len(data)), 1, uint64(wp), uint64(hp), uint64(csp), uint64(chp), uint64(pmp), 0)
	if err != nil {
		return cfg, nil, err
	}
	if ok == 0 {
		return cfg, nil, in.refusal("libheif")
	}
	var v [5]uint32
	for i, p := range []uint32{wp, hp, csp, chp, pmp} {
		if v[i], err = in.u32(p); err != nil {
			return cfg, nil, err
		}
	}
	width, height, colorspace, chroma, premultiplied := int(v[0]), int(v[1]), v[2], v[3], v[4]
	cfg.Width, cfg.Height = width, height
	switch colorspace {
	case heifColorspaceYCbCr:
		cfg.ColorModel = color.YCbCrModel
	case heifColorspaceMonochrome:
		cfg.ColorModel = color.GrayModel
	case heifColorspaceRGB:
		cfg.ColorModel = color.NRGBAModel
		if premultiplied == 1 {
			cfg.ColorModel = color.RGBAModel
		}
	default:
		return cfg, nil, fmt.Errorf("libheif: unsupported colorspace %d", colorspace)
	}
	if configOnly {
		return cfg, nil, nil
	}
	if width <= 0 || height <= 0 || int64(width)*int64(height) > limit {
		return cfg, nil, fmt.Errorf("libheif: image of %dx%d pixels: %w", width, height, ErrMemoryLimit)
	}
	rect := image.Rect(0, 0, width, height)
	var size, i0, i1, stride, cw, ch int
	var ratio image.YCbCrSubsampleRatio
	switch colorspace {
	case heifColorspaceYCbCr:
		switch chroma {
		case heifChroma420:
			ratio, cw, ch = image.YCbCrSubsampleRatio420, (width+1)/2, (height+1)/2
		case heifChroma422:
			ratio, cw, ch = image.YCbCrSubsampleRatio422, (width+1)/2, height
		case heifChroma444:
			ratio, cw, ch = image.YCbCrSubsampleRatio444, width, height
		default:
			return cfg, nil, fmt.Errorf("libheif: unsupported chroma %d", chroma)
		}
		stride, cw = align16(width), align16(cw)
		i0, i1 = stride*height, stride*height+cw*ch
		size = i1 + cw*ch
	case heifColorspaceMonochrome:
		stride = align16(width)
		size = height * stride
	default:
		stride = align16(4 * width)
		size = height * stride
	}
	outPtr, err := in.malloc(ctx, uint64(size))
	if err != nil {
		return cfg, nil, err
	}
	ok, err = in.call(ctx, "decode", uint64(inPtr), uint64(len(data)), 0, uint64(wp), uint64(hp), uint64(csp), uint64(chp), uint64(pmp), uint64(outPtr))
	if err != nil {
		return cfg, nil, err
	}
	if ok == 0 {
		return cfg, nil, in.refusal("libheif")
	}
	pix, err := in.read(outPtr, uint32(size))
	if err != nil {
		return cfg, nil, err
	}
	switch colorspace {
	case heifColorspaceYCbCr:
		return cfg, &image.YCbCr{Y: pix[:i0:i0], Cb: pix[i0:i1:i1], Cr: pix[i1:size:size],
			SubsampleRatio: ratio, YStride: stride, CStride: cw, Rect: rect}, nil
	case heifColorspaceMonochrome:
		return cfg, &image.Gray{Pix: pix, Stride: stride, Rect: rect}, nil
	case heifColorspaceRGB:
		if premultiplied == 1 {
			return cfg, &image.RGBA{Pix: pix, Stride: stride, Rect: rect}, nil
		}
	}
	return cfg, &image.NRGBA{Pix: pix, Stride: stride, Rect: rect}, nil
}

func align16(n int) int { return (n + 15) &^ 15 }
