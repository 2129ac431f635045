package normalize

import (
	"bytes"
	"encoding/binary"
	"math"

	"github.com/pgimageai/pgimageai/magic"
)

// wasmHeap is what a WebAssembly decoder (libheif with libde265, libavif
// with libaom, run by wazero) holds whatever the image: the module's data,
// stack and the codec's own state.
const wasmHeap = 16 << 20

// wasmPerPixel is the most linear memory, in bytes a pixel of the primary
// image, a WebAssembly decoder takes beyond wasmHeap and the file it copies
// in: what the codec decodes into (its reference frames, with borders and
// the planes at 16 bits in libaom), the converted copy it hands out, and
// malloc's slack. Measured on 4032 × 3024 images (wasmdec's linear memory
// at its most): a HEIC (4:2:0, 8 bits, heif-enc) 7.1 bytes a pixel; an AVIF
// (avifenc) 20.8 at 4:2:0 and 8 bits, 33.7 at 4:4:4 and 10 bits. The
// bounds are 12 and 40, for the alpha plane and malloc's fragmentation.
func wasmPerPixel(f magic.Format) int64 {
	if f == magic.AVIF {
		return 40
	}
	return 12
}

// wasmLimit is what the linear memory of a WebAssembly decode of data (px
// pixels per its checked header) may grow to: a decode that asks for more
// is stopped (wasmdec.ErrMemoryLimit), whatever its file says.
func wasmLimit(f magic.Format, data []byte, px int64) int64 {
	return int64(len(data)) + wasmPerPixel(f)*px + wasmHeap
}

// headerBytes is the linear memory a WebAssembly decoder may use to read a
// file's header (parsing, no pixel): the file and the heap.
func headerBytes(data []byte) int64 { return 2*int64(len(data)) + wasmHeap }

// wasmBytes: the decoder's linear memory (wasmLimit, outside the Go heap:
// mapped for the decode and unmapped after it) and the decoded image copied
// out of it into Go memory: YCbCr, Gray, RGBA or NRGBA for HEIF, at most 4
// bytes a pixel; RGBA or RGBA64 for AVIF, at most 8.
func wasmBytes(f magic.Format, data []byte, px int64) int64 {
	out := int64(4)
	if f == magic.AVIF {
		out = 8
	}
	return wasmLimit(f, data, px) + out*px
}

// DecoderBytes is what a decode holds besides the decoded pixels: the
// decoder's tables, zlib and LZW state and bit readers.
const DecoderBytes = 128 << 10

const decoderBytes = DecoderBytes

// DecodedBytes estimates, from the header of an image of w × h pixels, the
// bytes its decoder allocates: the decoded image in the colour model the
// decoder picks for the file, and the decoder's own buffers. It errs high; a
// header it cannot read is estimated as the format's worst case. It reads
// no pixel and is safe for concurrent use.
func DecodedBytes(f magic.Format, data []byte, w, h int) int64 {
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
	case magic.BMP:
		// x/image/bmp: RGBA (32-bit) or Paletted (8-bit) or RGBA from 24-bit.
		return 4*px + decoderBytes
	case magic.TIFF:
		// x/image/tiff: up to RGBA64 or NRGBA64 (8 bytes a pixel) and a
		// strip or tile of the file's own bytes, at most the whole file.
		return 8*px + int64(len(data)) + decoderBytes
	case magic.HEIF, magic.AVIF:
		return wasmBytes(f, data, px)
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
