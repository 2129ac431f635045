package normalize

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/jpeg"
	"image/png"
	"math"
	"strings"
	"time"

	"github.com/pgimageai/pgimageai/internal/wasmdec"
	"github.com/pgimageai/pgimageai/magic"
)

// Result is what to send: Data in Format. Changed is false when Data is
// the stored image itself (the same slice), which nothing needed; Changes
// then is empty, else it says what was done, e.g. "orientation 6 applied;
// 4032x3024 → 1024x768; re-encoded as JPEG, metadata stripped".
type Result struct {
	Data          []byte
	Format        magic.Format
	Changed       bool
	Width, Height int // as sent, when known (0 for an image sent as stored whose header was not read)
	Changes       string
}

// maxPixels bounds the pixels of a header that is estimated at all, so that
// no estimate overflows (a PNG header may claim 2³⁰ × 2³⁰): 2³² pixels, far
// past any bound of bytes.
const maxPixels = 1 << 32

// plan is what an image needs, decided from its header.
type plan struct {
	h            header
	tw, th       int // the size to send, as shown (orientation applied)
	resize       bool
	convert      bool
	orient       bool
	stripOnly    bool // an image that needs nothing but its metadata segments or chunks removed
	out          magic.Format
	decodedBytes int64
	wasmBytes    int64 // what a WebAssembly decoder's memory may grow to
	native       bool  // normalised by libvips (vips.go)
}

// decide reads img's header and decides what it needs. ok is false when
// nothing is needed.
func decide(ctx context.Context, img []byte, f magic.Format, s Settings) (plan, bool, error) {
	h, err := readHeader(ctx, img, f)
	if err != nil {
		if ctx.Err() != nil {
			return plan{}, false, ctx.Err()
		}
		if errors.Is(err, ErrTooLarge) {
			return plan{}, false, err
		}
		if s.accepts(f) {
			// A header this package cannot read, of a format the model
			// takes as it is: sent as stored, the provider judges it.
			return plan{}, false, nil
		}
		return plan{}, false, &DecodeError{Decoder: decoderName(f), Format: f, Err: err}
	}
	if px := int64(h.width) * int64(h.height); px > maxPixels {
		return plan{}, false, fmt.Errorf("%s image of %dx%d pixels says it has more than %d pixels: %w", f, h.width, h.height, int64(maxPixels), ErrTooLarge)
	}
	p := plan{h: h, orient: h.orientation >= 2 && h.orientation <= 8, convert: !s.accepts(f)}
	sw, sh := h.width, h.height
	if p.orient && swapsSides(h.orientation) {
		sw, sh = sh, sw
	}
	p.tw, p.th = s.Size.Fit(sw, sh)
	p.resize = p.tw != sw || p.th != sh
	if !p.resize && !p.convert && !p.orient {
		if h.metadata || (f == magic.PNG && pngHasMetadata(img)) || (f == magic.WebP && webpHasMetadata(img)) {
			p.stripOnly, p.out = true, f
			return p, true, nil
		}
		return p, false, nil
	}
	switch {
	case !h.lossless && s.accepts(magic.JPEG):
		p.out = magic.JPEG
	case s.accepts(magic.PNG):
		p.out = magic.PNG
	case s.accepts(magic.JPEG):
		p.out = magic.JPEG
	default:
		return p, false, &DecodeError{Decoder: decoderName(f), Format: f,
			Err: errors.New("the model accepts neither JPEG nor PNG, the formats images are converted to")}
	}
	if f == magic.JPEG {
		if err := CheckJPEG(img, h.width, h.height, s.MaxJPEGScans, "normalize_max_jpeg_scans"); err != nil {
			return p, false, err
		}
	}
	p.decodedBytes = DecodedBytes(f, img, h.width, h.height)
	p.wasmBytes = wasmLimit(f, img, int64(h.width)*int64(h.height))
	if px := int64(h.width) * int64(h.height); h.coded > px {
		// Coded larger than shown (HEVC's whole coding blocks, a grid's
		// tiles past its output, an alpha plane): the decoder allocates
		// for what is coded.
		p.decodedBytes, p.wasmBytes = wasmBytes(f, img, h.coded), wasmLimit(f, img, h.coded)
	}
	if vipsHandles(f) {
		p.native, p.wasmBytes = true, 0
		p.decodedBytes = vipsBytes(f, img, h, p.tw, p.th)
	}
	return p, true, nil
}

// workBytes is what a normalisation of plan p holds besides the decoder's
// image: the reduced image (RGBA, the whole image when no whole factor
// reduces it), the target and its turned copy, and the encoder's output.
func (p plan) workBytes() int64 {
	if p.stripOnly || p.native {
		return 0 // libvips: in vipsBytes
	}
	px := int64(p.h.width) * int64(p.h.height)
	k := int64(max(1, min(p.h.width/max(1, min(p.tw, p.th)), p.h.height/max(1, max(p.tw, p.th)))))
	if k >= 2 {
		px = (int64(p.h.width)/k + 1) * (int64(p.h.height)/k + 1)
	}
	return 4*px + 3*4*int64(p.tw)*int64(p.th)
}

// Estimate is Memory and Sent from one read of img's header: what a caller
// charges to its byte budget before calling Image, and the size and
// re-encoding of what Image will make.
func Estimate(img []byte, f magic.Format, s Settings) (memory int64, w, h int, reencoded bool) {
	if !s.Enabled {
		return 0, 0, 0, false
	}
	ctx, cancel := deadline(context.Background(), f, s.decodeTimeout())
	defer cancel()
	p, ok, err := decide(ctx, img, f, s)
	switch {
	case err != nil || !ok:
		return 0, p.h.width, p.h.height, false
	case p.stripOnly:
		return int64(len(img)), p.h.width, p.h.height, false
	}
	return sat(p.decodedBytes, p.workBytes()), p.tw, p.th, true
}

// Sent returns, from img's header only, the size of the image Image makes
// of it and whether that image is re-encoded (decoded, and so not the
// stored pixels): what a provider that decodes the image it is sent will
// hold. For an image sent as stored (or only stripped) it is false.
func Sent(img []byte, f magic.Format, s Settings) (w, h int, reencoded bool) {
	if !s.Enabled {
		return 0, 0, false
	}
	ctx, cancel := deadline(context.Background(), f, s.decodeTimeout())
	defer cancel()
	p, ok, err := decide(ctx, img, f, s)
	if err != nil || !ok || p.stripOnly {
		return p.h.width, p.h.height, false
	}
	return p.tw, p.th, true
}

// Memory is the bytes Image would allocate for img beyond img itself,
// from its header only: 0 when img needs nothing, else the decoder's
// allocations (DecodedBytes) and the resize's and encoder's. It is what a
// caller charges to a byte budget before calling Image.
func Memory(img []byte, f magic.Format, s Settings) int64 {
	if !s.Enabled {
		return 0
	}
	ctx, cancel := deadline(context.Background(), f, s.decodeTimeout())
	defer cancel()
	p, ok, err := decide(ctx, img, f, s)
	if err != nil || !ok {
		return 0
	}
	if p.stripOnly {
		return int64(len(img))
	}
	return sat(p.decodedBytes, p.workBytes())
}

func sat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Image normalises img, of format f (magic.Detect's), for a model with
// settings s. With s.Enabled false, or when img needs nothing, it returns
// img itself, not decoded. Errors: a *DecodeError naming the decoder when
// the image cannot be read or converted; an error wrapping ErrTooLarge when
// its decode would pass a bound (the bytes, a HEIF or AVIF coded larger
// than its header says, a JPEG's scans; nothing is decoded then), or when it
// ran out of s.DecodeTimeout (the decode is stopped); ctx's error when ctx
// ended first.
func Image(ctx context.Context, img []byte, f magic.Format, s Settings) (Result, error) {
	stored := Result{Data: img, Format: f}
	if !s.Enabled {
		return stored, nil
	}
	parent := ctx
	ctx, cancel := deadline(ctx, f, s.decodeTimeout())
	defer cancel()
	r, err := normalise(ctx, img, f, s)
	if err != nil && parent.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return Result{}, fmt.Errorf("%s image: normalising took longer than %s (option normalize_decode_timeout); stopped: %w", f, s.decodeTimeout(), ErrTooLarge)
	}
	if err != nil && parent.Err() != nil {
		return Result{}, parent.Err()
	}
	return r, err
}

// deadline is ctx with a timeout of d, which starts once the WebAssembly
// decoders of a HEIF or AVIF image are compiled (once per process): the
// compilation is no part of an image's time.
func deadline(ctx context.Context, f magic.Format, d time.Duration) (context.Context, context.CancelFunc) {
	if (f == magic.HEIF || f == magic.AVIF) && !vipsHandles(f) {
		_ = wasmdec.Compile() // its error is the decode's
	}
	return context.WithTimeout(ctx, d)
}

func normalise(ctx context.Context, img []byte, f magic.Format, s Settings) (Result, error) {
	stored := Result{Data: img, Format: f}
	p, ok, err := decide(ctx, img, f, s)
	if err != nil {
		return Result{}, err
	}
	if !ok {
		stored.Width, stored.Height = p.h.width, p.h.height
		return stored, nil
	}
	if p.stripOnly {
		var out []byte
		switch f {
		case magic.PNG:
			out, err = stripPNG(img)
		case magic.WebP:
			out, err = stripWebP(img)
		default:
			out, err = strip(img)
		}
		if err != nil {
			return stored, nil // unreachable: the header walk read the same segments
		}
		return Result{Data: out, Format: f, Changed: true, Width: p.h.width, Height: p.h.height,
			Changes: "metadata removed (pixels untouched)"}, nil
	}
	if p.native {
		return normaliseVips(ctx, img, f, s, p)
	}
	m, err := decode(ctx, img, f, p.h, sat(p.decodedBytes, p.workBytes()), s.maxDecodedBytes(), p.wasmBytes)
	if err != nil {
		return Result{}, err
	}
	// Resize in the stored orientation, then turn the small image.
	rw, rh := p.tw, p.th
	if p.orient && swapsSides(p.h.orientation) {
		rw, rh = rh, rw
	}
	small := resize(m, rw, rh)
	m = nil
	if p.orient {
		small = orient(small, p.h.orientation)
	}
	if p.out == magic.JPEG && s.accepts(magic.PNG) && !small.Opaque() {
		p.out = magic.PNG // alpha: JPEG has none
	}
	var buf bytes.Buffer
	if p.out == magic.JPEG {
		err = jpeg.Encode(&buf, small, &jpeg.Options{Quality: s.quality()})
	} else {
		enc := png.Encoder{CompressionLevel: png.BestSpeed}
		err = enc.Encode(&buf, small) // RGB when small is opaque
	}
	if err != nil {
		return Result{}, fmt.Errorf("encode %s: %w", p.out, err)
	}
	var what []string
	if p.orient {
		what = append(what, fmt.Sprintf("EXIF orientation %d applied", p.h.orientation))
	}
	if p.resize {
		what = append(what, fmt.Sprintf("%dx%d → %dx%d", p.h.width, p.h.height, small.Rect.Dx(), small.Rect.Dy()))
	}
	what = append(what, fmt.Sprintf("%s re-encoded as %s, metadata stripped", f, p.out))
	return Result{Data: buf.Bytes(), Format: p.out, Changed: true,
		Width: small.Rect.Dx(), Height: small.Rect.Dy(), Changes: strings.Join(what, "; ")}, nil
}

// Dimensions returns the width and height img's header gives (EXIF rotation
// not applied), without decoding a pixel; ok is false when the header cannot
// be read. A HEIF or AVIF file's are its primary item's ispe box, read here
// without a decoder, so that the start of a file is enough.
func Dimensions(img []byte, f magic.Format) (w, h int, ok bool) {
	if f == magic.HEIF || f == magic.AVIF {
		c, err := readContainer(img)
		if err != nil {
			return 0, 0, false
		}
		iw, ih, ok := c.items[c.primary].ispe()
		if !ok || iw == 0 || ih == 0 || iw > 1<<30 || ih > 1<<30 {
			return 0, 0, false
		}
		return int(iw), int(ih), true
	}
	ctx, cancel := deadline(context.Background(), f, DefaultDecodeTimeout)
	defer cancel()
	hd, err := readHeader(ctx, img, f)
	if err != nil {
		return 0, 0, false
	}
	return hd.width, hd.height, true
}
