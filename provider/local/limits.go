package local

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/pgimageai/pgimageai/magic"
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
	need := decodedBytes(f, data, w, h)
	if need > l.MaxDecodedBytes {
		return tooLarge("%s image of %dx%d pixels would take %.1f MiB to decode, over the limit of %.1f MiB (option max_decoded_bytes)",
			f, w, h, float64(need)/(1<<20), float64(l.MaxDecodedBytes)/(1<<20))
	}
	return nil
}

// decoderBytes is what a call holds besides the decoded pixels: the
// decoder's tables, zlib and LZW state and bit readers, and shrink's output
// and accumulators.
const decoderBytes = 64<<10 + 4*workSize*workSize + 64<<10

// decodedBytes estimates, from the header of an image of w × h pixels, the
// bytes its decoder allocates: the decoded image in the colour model the
// decoder picks for the file, and the decoder's own buffers. It errs high; a
// header it cannot read is estimated as the format's worst case.
func decodedBytes(f magic.Format, data []byte, w, h int) int64 {
	px := int64(w) * int64(h)
	switch f {
	case magic.PNG:
		return pngBytes(data, w, h)
	case magic.GIF:
		// image/gif: the first frame (within the logical screen) as
		// *image.Paletted, copied once more when it is interlaced.
		return 2*px + decoderBytes
	case magic.WebP:
		return webpBytes(data, w, h)
	case magic.JPEG:
		return jpegBytes(data, w, h)
	}
	return math.MaxInt64
}

// pngBytes: image/png decodes into the model of the colour type (and tRNS):
// Gray or Paletted (1 byte a pixel), Gray16 (2), RGBA or NRGBA (4),
// RGBA64 or NRGBA64 (8); an interlaced image once more, pass by pass; and two
// rows of the file's own bits per pixel.
func pngBytes(data []byte, w, h int) int64 {
	depth, colour, interlaced, trns, ok := pngInfo(data)
	if !ok {
		depth, colour, interlaced, trns = 16, 6, true, true
	}
	channels := map[byte]int64{0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[colour]
	if channels == 0 {
		channels = 4
	}
	var perPixel int64
	switch {
	case colour == 3:
		perPixel = 1
	case colour == 0 && !trns:
		perPixel = int64(max(1, depth/8))
	case depth == 16:
		perPixel = 8
	default:
		perPixel = 4
	}
	px := int64(w) * int64(h)
	img := px * perPixel
	if interlaced {
		img *= 2
	}
	row := 1 + (channels*int64(depth)*int64(w)+7)/8
	return img + 2*row + decoderBytes
}

// pngInfo reads IHDR's bit depth, colour type and interlace method, and
// whether a tRNS chunk comes before the first IDAT (PNG 1.2 §4.1, §11.2.2).
func pngInfo(data []byte) (depth, colour byte, interlaced, trns, ok bool) {
	const sig = 8
	if len(data) < sig+8+13 || string(data[sig+4:sig+8]) != "IHDR" {
		return 0, 0, false, false, false
	}
	ihdr := data[sig+8:]
	depth, colour, interlaced = ihdr[8], ihdr[9], ihdr[12] != 0
	for p := sig; p+8 <= len(data); {
		n := int64(binary.BigEndian.Uint32(data[p:]))
		switch string(data[p+4 : p+8]) {
		case "tRNS":
			trns = true
		case "IDAT", "IEND":
			return depth, colour, interlaced, trns, true
		}
		next := int64(p) + 12 + n
		if next > int64(len(data)) {
			break
		}
		p = int(next)
	}
	return depth, colour, interlaced, trns, true
}

// webpBytes: x/image/webp decodes lossy (VP8) into 4:2:0 YCbCr of whole
// 16 × 16 macroblocks (1.5 bytes a pixel) and an alpha channel (ALPH) through
// the lossless decoder; lossless (VP8L) into 4 bytes a pixel, plus up to 2
// more for an inverse colour-indexing transform and 1 for the transforms'
// and Huffman groups' sub-images.
func webpBytes(data []byte, w, h int) int64 {
	px := int64(w) * int64(h)
	const lossless, alpha = 7, 8
	lossy := int64((w+15)/16*16) * int64((h+15)/16*16) * 3 / 2
	var hasVP8, hasVP8L, hasALPH bool
	for p := 12; p+8 <= len(data); {
		n := int64(binary.LittleEndian.Uint32(data[p+4:]))
		switch string(data[p : p+4]) {
		case "VP8 ":
			hasVP8 = true
		case "VP8L":
			hasVP8L = true
		case "ALPH":
			hasALPH = true
		}
		next := int64(p) + 8 + n + n&1
		if next > int64(len(data)) {
			break
		}
		p = int(next)
	}
	switch {
	case hasVP8 && !hasVP8L && !hasALPH:
		return lossy + decoderBytes
	case hasVP8L && !hasVP8:
		return lossless*px + decoderBytes
	}
	return lossy + alpha*px + lossless*px + decoderBytes // not recognised: the worst
}

// jpegBytes: image/jpeg decodes every component's blocks (8 × 8 samples,
// whole MCUs) into a Gray or YCbCr image; a progressive file first holds all
// their DCT coefficients, 4 bytes a sample; an RGB file (Adobe transform 0,
// or components named R, G, B, without JFIF) is converted to RGBA, and a
// four-component one (CMYK, YCCK) to CMYK through RGBA.
func jpegBytes(data []byte, w, h int) int64 {
	sof, ok := jpegFrame(data)
	if !ok {
		// Not read: the worst, four 1×1 components, progressive.
		px := int64((w+7)/8*8) * int64((h+7)/8*8)
		return 4*px + 16*px + 8*px + decoderBytes
	}
	var hmax, vmax int64 = 1, 1
	for _, c := range sof.comps {
		hmax, vmax = max(hmax, c.h), max(vmax, c.v)
	}
	mxx := (int64(w) + 8*hmax - 1) / (8 * hmax)
	myy := (int64(h) + 8*vmax - 1) / (8 * vmax)
	var samples int64
	for _, c := range sof.comps {
		samples += mxx * c.h * myy * c.v * 64
	}
	full := 8 * hmax * mxx * 8 * vmax * myy
	// No component sampled at full resolution is a file image/jpeg refuses
	// (an unsupported ratio); it is estimated as if one were.
	samples = max(samples, full)
	n := samples + decoderBytes
	if sof.progressive {
		n += 4 * samples
	}
	switch {
	case len(sof.comps) == 4:
		n += 8 * full
	case len(sof.comps) == 3 && sof.rgb:
		n += 4 * full
	}
	return n
}

type jpegComp struct{ h, v int64 }

type jpegSOF struct {
	progressive bool
	rgb         bool
	comps       []jpegComp
}

// jpegFrame walks the markers of a JPEG (ITU T.81 B.1) up to its first
// scan, as image/jpeg does: the start-of-frame (SOF0–SOF2, the ones
// image/jpeg decodes; SOF2 is progressive) and the APP0 JFIF and APP14
// Adobe markers, before or after it, which tell an RGB file.
func jpegFrame(data []byte) (jpegSOF, bool) {
	var sof jpegSOF
	var ids []byte
	seen, jfif, adobeRGB := false, false, false
	done := func() (jpegSOF, bool) {
		sof.rgb = len(sof.comps) == 3 && !jfif && (adobeRGB || string(ids) == "RGB")
		return sof, seen
	}
	p := 2
	for p+4 <= len(data) {
		if data[p] != 0xFF {
			return sof, false
		}
		m := data[p+1]
		if m == 0xFF { // fill byte
			p++
			continue
		}
		if m == 0xD8 || (m >= 0xD0 && m <= 0xD7) || m == 0x01 {
			p += 2
			continue
		}
		if m == 0xDA || m == 0xD9 { // the first scan, or the end
			return done()
		}
		n := int(binary.BigEndian.Uint16(data[p+2:]))
		if n < 2 || p+2+n > len(data) {
			return done()
		}
		seg := data[p+4 : p+2+n]
		switch {
		case m == 0xE0 && bytes.HasPrefix(seg, []byte("JFIF\x00")):
			jfif = true
		case m == 0xEE && len(seg) >= 12 && bytes.HasPrefix(seg, []byte("Adobe")):
			adobeRGB = seg[11] == 0
		case (m == 0xC0 || m == 0xC1 || m == 0xC2) && !seen:
			if len(seg) < 6 {
				return sof, false
			}
			nc := int(seg[5])
			if nc < 1 || nc > 4 || len(seg) < 6+3*nc {
				return sof, false
			}
			for i := range nc {
				hv := seg[6+3*i+1]
				h, v := int64(hv>>4), int64(hv&0x0F)
				if h < 1 || h > 4 || v < 1 || v > 4 {
					return sof, false
				}
				sof.comps = append(sof.comps, jpegComp{h, v})
				ids = append(ids, seg[6+3*i])
			}
			sof.progressive = m == 0xC2
			seen = true
		}
		p += 2 + n
	}
	return done()
}
