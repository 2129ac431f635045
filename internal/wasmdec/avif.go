package wasmdec

import (
	"context"
	_ "embed"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
)

//go:embed lib/avif.wasm.gz
var avifWasm []byte

var avif = &module{gz: avifWasm}

// AVIFConfig reads the primary image's size and colour model of an AVIF
// file, decoding no pixel, in an instance of at most limit bytes.
func AVIFConfig(ctx context.Context, data []byte, limit int64) (image.Config, error) {
	c, _, err := decodeAVIF(ctx, data, limit, true)
	return c, err
}

// AVIF decodes the first image of an AVIF file in an instance of at most
// limit bytes of linear memory, ended when ctx is done: an *image.RGBA (8
// bits) or *image.RGBA64 (10 or 12 bits), alpha premultiplied, in Go
// memory.
func AVIF(ctx context.Context, data []byte, limit int64) (image.Image, error) {
	_, m, err := decodeAVIF(ctx, data, limit, false)
	return m, err
}

func decodeAVIF(ctx context.Context, data []byte, limit int64, configOnly bool) (image.Config, image.Image, error) {
	var cfg image.Config
	if err := ctx.Err(); err != nil {
		return cfg, nil, err
	}
	in, err := avif.instantiate(ctx, limit)
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
	out, err := in.malloc(ctx, 4*4)
	if err != nil {
		return cfg, nil, err
	}
	wp, hp, dp, np := out, out+4, out+8, out+12
	ok, err := in.call(ctx, "decode", uint64(inPtr), uint64(len(data)), 1, 0, uint64(wp), uint64(hp), uint64(dp), uint64(np), 0, 0)
	if err != nil {
		return cfg, nil, err
	}
	if ok == 0 {
		return cfg, nil, in.refusal("libavif")
	}
	var v [3]uint32
	for i, p := range []uint32{wp, hp, dp} {
		if v[i], err = in.u32(p); err != nil {
			return cfg, nil, err
		}
	}
	width, height, depth := int(v[0]), int(v[1]), v[2]
	cfg.Width, cfg.Height, cfg.ColorModel = width, height, color.RGBAModel
	bpp := 4
	if depth > 8 {
		cfg.ColorModel, bpp = color.RGBA64Model, 8
	}
	if configOnly {
		return cfg, nil, nil
	}
	if width <= 0 || height <= 0 || int64(width)*int64(height)*int64(bpp) > limit {
		return cfg, nil, fmt.Errorf("libavif: image of %dx%d pixels: %w", width, height, ErrMemoryLimit)
	}
	size := width * height * bpp
	outPtr, err := in.malloc(ctx, uint64(size))
	if err != nil {
		return cfg, nil, err
	}
	delayPtr, err := in.malloc(ctx, 8)
	if err != nil {
		return cfg, nil, err
	}
	ok, err = in.call(ctx, "decode", uint64(inPtr), uint64(len(data)), 0, 0, uint64(wp), uint64(hp), uint64(dp), uint64(np), uint64(delayPtr), uint64(outPtr))
	if err != nil {
		return cfg, nil, err
	}
	if ok == 0 {
		return cfg, nil, in.refusal("libavif")
	}
	pix, err := in.read(outPtr, uint32(size))
	if err != nil {
		return cfg, nil, err
	}
	rect := image.Rect(0, 0, width, height)
	if depth > 8 {
		// libavif writes 16-bit samples in the module's (little-endian)
		// order; image.RGBA64 holds them big-endian.
		for i := 0; i+1 < len(pix); i += 2 {
			binary.BigEndian.PutUint16(pix[i:], binary.LittleEndian.Uint16(pix[i:]))
		}
		return cfg, &image.RGBA64{Pix: pix, Stride: 8 * width, Rect: rect}, nil
	}
	return cfg, &image.RGBA{Pix: pix, Stride: 4 * width, Rect: rect}, nil
}
