package normalize

import (
	"encoding/binary"
	"fmt"
)

// Defaults of the JPEG bounds.
const (
	// DefaultMaxJPEGScans is the most scans a JPEG may have to be decoded:
	// image/jpeg goes over every block of the image in each scan, so the
	// time a progressive file takes is its scans times its pixels. Encoders
	// write 1 (baseline) to about 10 (libjpeg's and mozjpeg's progressive
	// scripts); libjpeg-turbo's djpeg -maxscans and TurboJPEG's
	// TJPARAM_SCANLIMIT exist for the same reason (its fuzzers use 500).
	DefaultMaxJPEGScans = 100
	// MaxJPEGPixelsPerByte is the most pixels a JPEG may claim per byte of
	// its file: 4,096, some 30 times what the smallest real encoders write
	// (a one-colour 4:2:0 image at one bit a block). A file claiming more
	// is truncated or a bomb: a few bytes that make the decoder allocate
	// and go over a huge image.
	MaxJPEGPixelsPerByte = 4096
)

// JPEGScans counts the scans (SOS markers, ITU T.81 B.2.3) of a JPEG,
// walking its markers and skipping each scan's entropy-coded data (stuffed
// 0xFF00 bytes and RSTn markers within it) up to EOI or the end of the data.
// It decodes nothing and is safe for concurrent use.
func JPEGScans(data []byte) int {
	scans := 0
	p := 2
	for p+1 < len(data) {
		if data[p] != 0xFF {
			p++
			continue
		}
		m := data[p+1]
		switch {
		case m == 0xFF:
			p++
			continue
		case m == 0x00 || (m >= 0xD0 && m <= 0xD7) || m == 0x01 || m == 0xD8:
			p += 2
			continue
		case m == 0xD9:
			return scans
		}
		if p+4 > len(data) {
			return scans
		}
		n := int(binary.BigEndian.Uint16(data[p+2:]))
		if n < 2 {
			return scans
		}
		p += 2 + n
		if m != 0xDA {
			continue
		}
		scans++
		// The entropy-coded data: up to the next marker that is not a
		// stuffed byte or a restart marker.
		for p+1 < len(data) {
			if data[p] == 0xFF && data[p+1] != 0x00 && (data[p+1] < 0xD0 || data[p+1] > 0xD7) && data[p+1] != 0xFF {
				break
			}
			p++
		}
	}
	return scans
}

// CheckJPEG refuses a JPEG of w × h pixels (its frame header's) before it
// is decoded when it has more than maxScans scans (0: DefaultMaxJPEGScans)
// or claims more than MaxJPEGPixelsPerByte pixels per byte of data: an
// error wrapping ErrTooLarge, naming option, the scan limit's.
func CheckJPEG(data []byte, w, h, maxScans int, option string) error {
	if maxScans <= 0 {
		maxScans = DefaultMaxJPEGScans
	}
	px := int64(w) * int64(h)
	if px > int64(len(data))*MaxJPEGPixelsPerByte {
		return fmt.Errorf("JPEG of %d bytes claims %dx%d pixels, more than %d pixels a byte: %w",
			len(data), w, h, MaxJPEGPixelsPerByte, ErrTooLarge)
	}
	if n := JPEGScans(data); n > maxScans {
		return fmt.Errorf("JPEG has %d scans, over the limit of %d (option %s): %w", n, maxScans, option, ErrTooLarge)
	}
	return nil
}
