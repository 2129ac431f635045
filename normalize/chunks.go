package normalize

import (
	"encoding/binary"
	"errors"
)

// PNG and WebP carry metadata in chunks of their own, which are removed
// without decoding when nothing else is needed, as a JPEG's segments are.

// pngMetadata: eXIf (EXIF, PNG 1.5 extensions), and the text chunks tEXt,
// zTXt and iTXt (which hold XMP among others).
func pngMetadata(typ string) bool {
	return typ == "eXIf" || typ == "tEXt" || typ == "zTXt" || typ == "iTXt"
}

// walkPNG calls fn with each chunk's type and its bytes (length, type, data
// and CRC) up to IEND, within img (PNG 1.2 §5.3).
func walkPNG(img []byte, fn func(typ string, chunk []byte)) error {
	for p := 8; ; {
		if p+12 > len(img) {
			return errors.New("PNG ends before IEND")
		}
		n := int64(binary.BigEndian.Uint32(img[p:]))
		end := int64(p) + 12 + n
		if end > int64(len(img)) {
			return errors.New("PNG chunk runs past the end")
		}
		typ := string(img[p+4 : p+8])
		fn(typ, img[p:end])
		if typ == "IEND" {
			return nil
		}
		p = int(end)
	}
}

// pngHasMetadata reports whether img has a chunk stripPNG removes.
func pngHasMetadata(img []byte) bool {
	found := false
	if err := walkPNG(img, func(typ string, _ []byte) { found = found || pngMetadata(typ) }); err != nil {
		return false
	}
	return found
}

// stripPNG returns img without its metadata chunks, the others byte for byte.
func stripPNG(img []byte) ([]byte, error) {
	out := append(make([]byte, 0, len(img)), img[:8]...)
	err := walkPNG(img, func(typ string, chunk []byte) {
		if !pngMetadata(typ) {
			out = append(out, chunk...)
		}
	})
	return out, err
}

// webpMetadata: the EXIF and XMP chunks of an extended WebP (RIFF
// container, https://developers.google.com/speed/webp/docs/riff_container).
func webpMetadata(fourCC string) bool { return fourCC == "EXIF" || fourCC == "XMP " }

// walkWebP calls fn with each chunk's FourCC and its bytes (header, payload
// and padding) within the RIFF's declared size and img.
func walkWebP(img []byte, fn func(fourCC string, chunk []byte)) error {
	if len(img) < 12 {
		return errors.New("WebP shorter than its RIFF header")
	}
	size := min(int64(binary.LittleEndian.Uint32(img[4:]))+8, int64(len(img)))
	for p := int64(12); p < size; {
		if p+8 > size {
			return errors.New("WebP chunk header runs past the end")
		}
		n := int64(binary.LittleEndian.Uint32(img[p+4:]))
		end := p + 8 + n + n&1
		if end > size {
			return errors.New("WebP chunk runs past the end")
		}
		fn(string(img[p:p+4]), img[p:end])
		p = end
	}
	return nil
}

func webpHasMetadata(img []byte) bool {
	found := false
	if err := walkWebP(img, func(c string, _ []byte) { found = found || webpMetadata(c) }); err != nil {
		return false
	}
	return found
}

// stripWebP returns img without its EXIF and XMP chunks, the VP8X flags
// that announce them cleared and the RIFF size set to what is left.
func stripWebP(img []byte) ([]byte, error) {
	out := append(make([]byte, 0, len(img)), img[:12]...)
	err := walkWebP(img, func(c string, chunk []byte) {
		if webpMetadata(c) {
			return
		}
		start := len(out)
		out = append(out, chunk...)
		if c == "VP8X" && len(chunk) > 8 {
			out[start+8] &^= 0x08 | 0x04 // EXIF and XMP flags
		}
	})
	if err != nil {
		return nil, err
	}
	binary.LittleEndian.PutUint32(out[4:], uint32(len(out)-8))
	return out, nil
}
