package normalize

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"image"
	"image/gif"
	"io"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
	"golang.org/x/image/webp"

	"github.com/pgimageai/pgimageai/internal/wasmdec"
	"github.com/pgimageai/pgimageai/magic"
)

// header is what an image's header says, read without decoding a pixel.
type header struct {
	width, height int
	orientation   int   // EXIF orientation 1–8; 1 when absent or unreadable
	metadata      bool  // a JPEG segment that strip removes (EXIF, XMP, IPTC, comment)
	lossless      bool  // PNG, GIF, BMP, TIFF, lossless WebP: re-encoded as PNG
	coded         int64 // HEIF, AVIF: the pixels decoded at their checked coded sizes (checkCoded)
}

// readHeader reads the header of img, whose format is f. The JPEG and PNG
// headers are walked here; the others are read by their decoders'
// DecodeConfig, which reads only the header. A HEIF or AVIF file is first
// checked here (checkCoded): its coded size against its ispe box, so that
// the size read is the size the decoder will allocate for; its header is
// then read by its decoder, parsing only, in an instance of at most
// headerBytes(img) of memory.
func readHeader(ctx context.Context, img []byte, f magic.Format) (header, error) {
	switch f {
	case magic.HEIF, magic.AVIF:
		if vipsHandles(f) {
			return containerHeader(f, img)
		}
		coded, err := checkCoded(f, img)
		if err != nil {
			return header{}, err
		}
		config := wasmdec.HEIFConfig
		if f == magic.AVIF {
			config = wasmdec.AVIFConfig
		}
		c, err := config(ctx, img, headerBytes(img))
		if err != nil {
			return header{}, err
		}
		if c.Width <= 0 || c.Height <= 0 {
			return header{}, fmt.Errorf("image has no pixels (%dx%d)", c.Width, c.Height)
		}
		return header{width: c.Width, height: c.Height, orientation: 1, coded: coded}, nil
	case magic.JPEG:
		return jpegHeader(img)
	case magic.PNG:
		// PNG 1.2 §11.2.2: IHDR is the first chunk, width and height
		// big-endian after its length and type.
		if len(img) < 24 || string(img[12:16]) != "IHDR" {
			return header{}, fmt.Errorf("no IHDR chunk")
		}
		w, h := binary.BigEndian.Uint32(img[16:]), binary.BigEndian.Uint32(img[20:])
		if w == 0 || h == 0 || w > 1<<30 || h > 1<<30 {
			return header{}, fmt.Errorf("IHDR size %dx%d", w, h)
		}
		return header{width: int(w), height: int(h), orientation: 1, lossless: true}, nil
	}
	var cfg func(io.Reader) (image.Config, error)
	lossless := true
	switch f {
	case magic.GIF:
		cfg = gif.DecodeConfig
	case magic.WebP:
		cfg = webp.DecodeConfig
		lossless = webpLossless(img)
	case magic.BMP:
		cfg = bmp.DecodeConfig
	case magic.TIFF:
		cfg = tiff.DecodeConfig
	default:
		return header{}, fmt.Errorf("no decoder for %s", f)
	}
	c, err := guard(cfg, img)
	if err != nil {
		return header{}, err
	}
	if c.Width <= 0 || c.Height <= 0 {
		return header{}, fmt.Errorf("image has no pixels (%dx%d)", c.Width, c.Height)
	}
	return header{width: c.Width, height: c.Height, orientation: 1, lossless: lossless}, nil
}

// webpLossless reports whether a WebP's first image chunk is VP8L
// (lossless), walking its RIFF chunks within the bytes present.
func webpLossless(img []byte) bool {
	for p := 12; p+8 <= len(img); {
		switch string(img[p : p+4]) {
		case "VP8L":
			return true
		case "VP8 ":
			return false
		}
		n := int64(binary.LittleEndian.Uint32(img[p+4:]))
		next := int64(p) + 8 + n + n&1
		if next > int64(len(img)) {
			break
		}
		p = int(next)
	}
	return false
}

// jpegHeader walks a JPEG's markers (ITU T.81 B.1) up to its first scan:
// the frame's size from its SOF, the orientation from an APP1 EXIF segment,
// and whether a segment strip removes is present.
func jpegHeader(img []byte) (header, error) {
	h := header{orientation: 1}
	sof := false
	err := walkJPEG(img, func(m byte, seg []byte) {
		switch {
		case m == 0xE1 && bytes.HasPrefix(seg, exifPrefix):
			h.metadata = true
			if o := exifOrientation(seg[len(exifPrefix):]); o != 0 {
				h.orientation = o
			}
		case strippable(m, seg):
			h.metadata = true
		case isSOF(m) && !sof && len(seg) >= 5:
			h.height = int(binary.BigEndian.Uint16(seg[1:]))
			h.width = int(binary.BigEndian.Uint16(seg[3:]))
			sof = true
		}
	})
	if err != nil {
		return header{}, err
	}
	if !sof || h.width == 0 || h.height == 0 {
		return header{}, fmt.Errorf("no frame header (SOF) with a size before the first scan")
	}
	return h, nil
}

// isSOF: the start-of-frame markers C0–CF but DHT (C4), JPG (C8) and DAC (CC).
func isSOF(m byte) bool { return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC }

var exifPrefix = []byte("Exif\x00\x00")

// walkJPEG calls seg for every marker segment before the first scan (SOS)
// with its marker and payload, and returns the offset of the SOS marker.
func walkJPEG(img []byte, seg func(m byte, payload []byte)) error {
	_, err := walkJPEGTo(img, seg)
	return err
}

func walkJPEGTo(img []byte, seg func(m byte, payload []byte)) (sos int, err error) {
	p := 2
	for p+4 <= len(img) {
		if img[p] != 0xFF {
			return 0, fmt.Errorf("marker expected at byte %d, found %#02x", p, img[p])
		}
		m := img[p+1]
		switch {
		case m == 0xFF: // fill byte
			p++
			continue
		case m == 0xD8 || (m >= 0xD0 && m <= 0xD7) || m == 0x01:
			p += 2
			continue
		case m == 0xDA:
			return p, nil
		case m == 0xD9:
			return 0, fmt.Errorf("end of image before the first scan")
		}
		n := int(binary.BigEndian.Uint16(img[p+2:]))
		if n < 2 || p+2+n > len(img) {
			return 0, fmt.Errorf("segment %#02x at byte %d of %d bytes runs past the end", m, p, n)
		}
		seg(m, img[p+4:p+2+n])
		p += 2 + n
	}
	return 0, fmt.Errorf("no scan before the end of the data")
}

// strippable: the segments that carry metadata rather than pixels: APP1
// (EXIF, XMP), APP13 (Photoshop IRB, IPTC) and COM. JFIF (APP0), ICC
// profiles (APP2) and Adobe's colour transform (APP14) stay: they say how to
// read the pixels.
func strippable(m byte, seg []byte) bool { return m == 0xE1 || m == 0xED || m == 0xFE }

// exifOrientation reads tag 0x0112 (Orientation) of IFD0 of a TIFF-structured
// EXIF block (CIPA DC-008 §4.6.4), within the block's bytes. It returns 0
// when the block or the tag cannot be read, or the value is not 1–8.
func exifOrientation(t []byte) int {
	if len(t) < 8 {
		return 0
	}
	var bo binary.ByteOrder
	switch string(t[:4]) {
	case "II*\x00":
		bo = binary.LittleEndian
	case "MM\x00*":
		bo = binary.BigEndian
	default:
		return 0
	}
	ifd := int64(bo.Uint32(t[4:]))
	if ifd < 8 || ifd+2 > int64(len(t)) {
		return 0
	}
	n := int64(bo.Uint16(t[ifd:]))
	for i := range n {
		e := ifd + 2 + 12*i
		if e+12 > int64(len(t)) {
			return 0
		}
		if bo.Uint16(t[e:]) != 0x0112 {
			continue
		}
		if bo.Uint16(t[e+2:]) != 3 { // SHORT
			return 0
		}
		v := int(bo.Uint16(t[e+8:]))
		if v < 1 || v > 8 {
			return 0
		}
		return v
	}
	return 0
}

// strip returns a JPEG without its strippable segments, the rest byte for
// byte: the scans are not decoded.
func strip(img []byte) ([]byte, error) {
	var keep [][2]int
	sos, err := walkJPEGTo(img, func(m byte, seg []byte) {
		start := cap(img) - cap(seg) - 4 // seg is img[start+4:]: its marker is at start
		if !strippable(m, seg) {
			keep = append(keep, [2]int{start, start + 4 + len(seg)})
		}
	})
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(img))
	out = append(out, 0xFF, 0xD8)
	for _, k := range keep {
		out = append(out, img[k[0]:k[1]]...)
	}
	return append(out, img[sos:]...), nil
}

// containerHeader reads a HEIF or AVIF file's header from its container
// alone, for libvips (which decodes it through libheif): checkCoded's
// checks, then the primary item's ispe box, its sides swapped when an irot
// box turns it a quarter (libheif applies irot and imir as it decodes, so
// the image comes out upright and the size is the one shown).
func containerHeader(f magic.Format, img []byte) (header, error) {
	coded, c, err := checkContainer(f, img)
	if err != nil {
		return header{}, err
	}
	it := c.items[c.primary]
	w, h, ok := it.ispe()
	if !ok || w == 0 || h == 0 || w > maxISPESide || h > maxISPESide {
		return header{}, fmt.Errorf("the primary item has no usable ispe box")
	}
	if r, ok := it.prop("irot"); ok && len(r.data) >= 1 && r.data[0]&3%2 == 1 {
		w, h = h, w
	}
	return header{width: int(w), height: int(h), orientation: 1, coded: coded}, nil
}
