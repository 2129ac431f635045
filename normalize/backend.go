package normalize

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/pgimageai/pgimageai/magic"
)

// Backend names the image backend, for --version: libvips (a build with
// cgo, without -tags nodynamic, on a host with libvips.so.42) for JPEG,
// HEIF and AVIF, the rest in Go; or pure Go and WebAssembly. In a cgo
// build it opens libvips to see.
func Backend() string { return backendName() }

// BackendSoFar is Backend without opening libvips, for the start-up line:
// libvips is opened at the first image that needs it, so that a bridge
// that never sees a JPEG, HEIC or AVIF never maps it.
func BackendSoFar() string { return backendSoFar() }

// startHook, when set, is told the backend when libvips is opened or found
// missing.
var startHook atomic.Pointer[func(backend string)]

// OnBackendStart has fn told, once, the image backend when libvips is
// opened at the first image that needs it (or found missing), for the
// service's log. Set it before the first image.
func OnBackendStart(fn func(backend string)) { startHook.Store(&fn) }

// vipsFixed is what libvips holds for one image whatever its size: its
// pipeline, the loader's and saver's state, libjpeg's or libheif's tables.
const vipsFixed = 16 << 20

// vipsBytes estimates what a libvips normalisation of img (header h, sent
// at tw × th) allocates. A JPEG is decoded at 1/k of its size in the DCT
// (shrink-on-load) and streamed; it is charged as if held whole at the
// smallest k libvips could pick (the largest power of two at most half the
// shrink, up to 8). A HEIF or AVIF image is decoded whole by libheif: its
// planes, the decoder's reference frame and the RGB copy libvips reads,
// 12 bytes a coded pixel at most (measured: about 10 at 8 bits 4:2:0 for a
// 12 MP HEIC and AVIF, the process's peak RSS of vipsthumbnail). Both: the
// file, the scaled image and its encoded copy.
func vipsBytes(f magic.Format, img []byte, h header, tw, th int) int64 {
	px := int64(h.width) * int64(h.height)
	out := 2 * 4 * int64(tw) * int64(th)
	var dec int64
	if f == magic.JPEG {
		sw, sh := h.width, h.height // as shown
		if swapsSides(h.orientation) {
			sw, sh = sh, sw
		}
		shrink := min(sw/max(1, tw), sh/max(1, th))
		k := int64(1)
		for k < 8 && int(2*k)*2 <= shrink {
			k *= 2
		}
		// Four bytes a pixel: a CMYK file's, and more than YCbCr's three.
		dec = 4 * ((int64(h.width)+k-1)/k + 1) * ((int64(h.height)+k-1)/k + 1)
	} else {
		dec = 12 * max(px, h.coded)
	}
	return sat(sat(dec, out), int64(len(img))+vipsFixed)
}

// normaliseVips is normalise through libvips, plan p decided.
func normaliseVips(ctx context.Context, img []byte, f magic.Format, s Settings, p plan) (Result, error) {
	if need, bound := p.decodedBytes, s.maxDecodedBytes(); need > bound {
		return Result{}, fmt.Errorf("%s image of %dx%d pixels would take %.1f MiB to normalise, over the bound of %.1f MiB (option normalize_max_decoded_bytes): %w",
			f, p.h.width, p.h.height, float64(need)/(1<<20), float64(bound)/(1<<20), ErrTooLarge)
	}
	png := 0
	switch {
	case p.out == magic.PNG:
		png = 1
	case s.accepts(magic.PNG):
		png = 2 // alpha: JPEG has none
	}
	o, err := vipsThumb(ctx, img, p.tw, p.th, false, png, s.quality())
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		return Result{}, &DecodeError{Decoder: vipsDecoderName(f), Format: f, Err: err}
	}
	if o.w != p.tw || o.h != p.th {
		return Result{}, &DecodeError{Decoder: vipsDecoderName(f), Format: f,
			Err: fmt.Errorf("made %dx%d pixels, the header said %dx%d", o.w, o.h, p.tw, p.th)}
	}
	out := magic.JPEG
	if o.png {
		out = magic.PNG
	}
	var what []string
	if p.orient {
		what = append(what, fmt.Sprintf("EXIF orientation %d applied", p.h.orientation))
	}
	if p.resize {
		what = append(what, fmt.Sprintf("%dx%d → %dx%d", p.h.width, p.h.height, o.w, o.h))
	}
	what = append(what, fmt.Sprintf("%s re-encoded as %s, metadata stripped", f, out))
	if len(o.data) == 0 {
		return Result{}, &DecodeError{Decoder: vipsDecoderName(f), Format: f, Err: errors.New("encoded nothing")}
	}
	return Result{Data: o.data, Format: out, Changed: true, Width: o.w, Height: o.h,
		Changes: strings.Join(what, "; ")}, nil
}
