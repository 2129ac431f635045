package magic

import (
	"bytes"
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
)

// Formats lists every recognised format in detection order.
var Formats = []Format{PNG, JPEG, GIF, WebP}

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
	}
	return ""
}

// String returns the format's conventional name: PNG, JPEG, GIF or WebP.
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
	}
	return "unknown"
}

// ParseMIME returns the format whose media type is mime, or false.
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
var ErrUnknownFormat = errors.New("image has no known magic bytes (PNG, JPEG, GIF, WebP)")

var (
	sigPNG   = []byte{0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A}
	sigJPEG  = []byte{0xFF, 0xD8, 0xFF}
	sigGIF87 = []byte("GIF87a")
	sigGIF89 = []byte("GIF89a")
	sigRIFF  = []byte("RIFF")
	sigWEBP  = []byte("WEBP")
)

// Detect returns the format of img from its magic bytes, checked in the order of
// SPEC §3: PNG (8-byte signature), JPEG (FF D8 FF), GIF (exactly GIF87a or
// GIF89a), WebP ("RIFF" at 0 and "WEBP" at 8). Only the first 12 bytes are
// read, so Detect is O(1) whatever the image size. It is safe for concurrent use.
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
	return 0, ErrUnknownFormat
}

// Head returns at most the first n bytes of img, copied, for error reports.
func Head(img []byte, n int) []byte {
	if len(img) < n {
		n = len(img)
	}
	return bytes.Clone(img[:n])
}
