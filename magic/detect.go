package magic

import (
	"bytes"
	"encoding/binary"
	"errors"
)

// Format is an image format recognised by its magic bytes.
type Format uint8

// The recognised formats. The zero value is not a format.
const (
	PNG Format = iota + 1
	JPEG
	GIF
	WebP
	HEIF // HEIC and other HEIF images (ISO/IEC 23008-12)
	AVIF
	BMP
	TIFF
)

// Formats lists the formats a provider may be sent as stored (the default
// of a model's formats option), in detection order. The formats of All
// beyond these are detected so that they can be converted first.
var Formats = []Format{PNG, JPEG, GIF, WebP}

// All lists every recognised format in detection order.
var All = []Format{PNG, JPEG, GIF, WebP, HEIF, AVIF, BMP, TIFF}

// MIME returns the format's media type, e.g. "image/png".
func (f Format) MIME() string {
	switch f {
	case PNG:
		return "image/png"
	case JPEG:
		return "image/jpeg"
	case GIF:
		return "image/gif"
	case WebP:
		return "image/webp"
	case HEIF:
		return "image/heic"
	case AVIF:
		return "image/avif"
	case BMP:
		return "image/bmp"
	case TIFF:
		return "image/tiff"
	}
	return ""
}

// String returns the format's conventional name: PNG, JPEG, GIF, WebP,
// HEIF, AVIF, BMP or TIFF.
func (f Format) String() string {
	switch f {
	case PNG:
		return "PNG"
	case JPEG:
		return "JPEG"
	case GIF:
		return "GIF"
	case WebP:
		return "WebP"
	case HEIF:
		return "HEIF"
	case AVIF:
		return "AVIF"
	case BMP:
		return "BMP"
	case TIFF:
		return "TIFF"
	}
	return "unknown"
}

// ParseMIME returns the format of Formats whose media type is mime, or
// false: the media types a model's formats option may name.
func ParseMIME(mime string) (Format, bool) {
	for _, f := range Formats {
		if f.MIME() == mime {
			return f, true
		}
	}
	return 0, false
}

// ErrEmpty is returned by Detect for a zero-length value.
var ErrEmpty = errors.New("image is empty (0 bytes)")

// ErrUnknownFormat is returned by Detect when no known magic bytes match.
var ErrUnknownFormat = errors.New("image has no known magic bytes (PNG, JPEG, GIF, WebP, HEIF, AVIF, BMP, TIFF)")

var (
	sigPNG    = []byte{0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A}
	sigJPEG   = []byte{0xFF, 0xD8, 0xFF}
	sigGIF87  = []byte("GIF87a")
	sigGIF89  = []byte("GIF89a")
	sigRIFF   = []byte("RIFF")
	sigWEBP   = []byte("WEBP")
	sigBMP    = []byte("BM")
	sigTIFFLE = []byte("II*\x00")
	sigTIFFBE = []byte("MM\x00*")
)

// maxFtypBytes caps how much of an ftyp box Detect reads, whatever size the
// box declares: real files carry a handful of compatible brands.
const maxFtypBytes = 256

// Detect returns the format of img from its magic bytes, checked in this
// order: PNG (8-byte signature), JPEG (FF D8 FF), GIF (exactly GIF87a or
// GIF89a), WebP ("RIFF" at 0 and "WEBP" at 8), HEIF and AVIF (an ISO-BMFF
// ftyp box at offset 4 whose major or a compatible brand is heic, heix, mif1,
// msf1 — HEIF — or avif, avis — AVIF), BMP ("BM"), TIFF ("II*\0" or
// "MM\0*"). At most the ftyp box's first 256 bytes are read, so Detect is
// O(1) whatever the image size. It is safe for concurrent use.
func Detect(img []byte) (Format, error) {
	switch {
	case len(img) == 0:
		return 0, ErrEmpty
	case bytes.HasPrefix(img, sigPNG):
		return PNG, nil
	case bytes.HasPrefix(img, sigJPEG):
		return JPEG, nil
	case bytes.HasPrefix(img, sigGIF87), bytes.HasPrefix(img, sigGIF89):
		return GIF, nil
	case len(img) >= 12 && bytes.Equal(img[0:4], sigRIFF) && bytes.Equal(img[8:12], sigWEBP):
		return WebP, nil
	}
	if f, ok := ftyp(img); ok {
		return f, nil
	}
	switch {
	case bytes.HasPrefix(img, sigBMP):
		return BMP, nil
	case bytes.HasPrefix(img, sigTIFFLE), bytes.HasPrefix(img, sigTIFFBE):
		return TIFF, nil
	}
	return 0, ErrUnknownFormat
}

// ftyp reads an ISO-BMFF file type box at the start of img (ISO/IEC
// 14496-12 §4.3: a 32-bit size, "ftyp", a major brand, a minor version,
// then compatible brands up to the box's end) and names the format of its
// brands. The box is read within its declared size, the bytes present and
// maxFtypBytes, whichever is least; a box of size 0 (to the end of the file)
// or 1 (a 64-bit size) is not a valid ftyp and is not read. A brand that is
// AVIF wins over one that is HEIF: an AVIF file lists mif1 too.
func ftyp(img []byte) (Format, bool) {
	if len(img) < 16 || string(img[4:8]) != "ftyp" {
		return 0, false
	}
	size := binary.BigEndian.Uint32(img)
	if size < 16 {
		return 0, false
	}
	end := int(min(uint32(maxFtypBytes), size))
	end = min(end, len(img))
	brand := func(b []byte) Format {
		switch string(b) {
		case "avif", "avis":
			return AVIF
		case "heic", "heix", "mif1", "msf1":
			return HEIF
		}
		return 0
	}
	found := brand(img[8:12])
	if found == AVIF {
		return AVIF, true
	}
	for p := 16; p+4 <= end; p += 4 {
		switch brand(img[p : p+4]) {
		case AVIF:
			return AVIF, true
		case HEIF:
			found = HEIF
		}
	}
	return found, found != 0
}

// Head returns at most the first n bytes of img, copied, for error reports.
func Head(img []byte, n int) []byte {
	if len(img) < n {
		n = len(img)
	}
	return bytes.Clone(img[:n])
}
