package normalize

import (
	"bytes"
	"encoding/binary"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"testing"
)

// quadrants is a w × h image whose four quadrants are red (top left), green
// (top right), blue (bottom left) and white (bottom right): any turn or
// mirror moves them, and they survive JPEG.
func quadrants(w, h int) *image.RGBA {
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.Set(x, y, quadrantColour(x >= w/2, y >= h/2))
		}
	}
	return m
}

func quadrantColour(right, bottom bool) color.RGBA {
	switch {
	case !right && !bottom:
		return color.RGBA{255, 0, 0, 255}
	case right && !bottom:
		return color.RGBA{0, 255, 0, 255}
	case !right && bottom:
		return color.RGBA{0, 0, 255, 255}
	}
	return color.RGBA{255, 255, 255, 255}
}

func encodeJPEG(tb testing.TB, m image.Image) []byte {
	tb.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: 95}); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

func encodePNG(tb testing.TB, m image.Image) []byte {
	tb.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// exifBlock is an APP1 EXIF payload (CIPA DC-008: "Exif\0\0", a big-endian
// TIFF header, IFD0) with the Orientation tag (0x0112) when orientation is
// not 0, a Make tag (0x010F) and a GPS IFD pointer (0x8825) to a GPS IFD
// holding GPSLatitudeRef "N" and GPSLatitude 48/1, 51/1, 30/1: the bytes a
// phone writes.
func exifBlock(orientation int) []byte {
	bo := binary.BigEndian
	var t bytes.Buffer
	t.WriteString("MM\x00*")
	binary.Write(&t, bo, uint32(8))
	type entry struct {
		tag, typ uint16
		count    uint32
		value    uint32
	}
	entries := []entry{{0x010F, 2, 4, 0}} // Make, "Cam\0" inline
	if orientation != 0 {
		entries = append(entries, entry{0x0112, 3, 1, uint32(orientation) << 16})
	}
	entries = append(entries, entry{0x8825, 4, 1, 0}) // GPS IFD, offset set below
	ifd0 := 8
	gps := ifd0 + 2 + 12*len(entries) + 4
	entries[len(entries)-1].value = uint32(gps)
	binary.Write(&t, bo, uint16(len(entries)))
	for _, e := range entries {
		binary.Write(&t, bo, e.tag)
		binary.Write(&t, bo, e.typ)
		binary.Write(&t, bo, e.count)
		if e.tag == 0x010F {
			t.WriteString("Cam\x00")
			continue
		}
		binary.Write(&t, bo, e.value)
	}
	binary.Write(&t, bo, uint32(0)) // no IFD1
	// GPS IFD: GPSLatitudeRef (1, ASCII "N"), GPSLatitude (2, 3 RATIONAL at rat).
	rat := gps + 2 + 2*12 + 4
	binary.Write(&t, bo, uint16(2))
	binary.Write(&t, bo, []uint16{1, 2})
	binary.Write(&t, bo, uint32(2))
	t.WriteString("N\x00\x00\x00")
	binary.Write(&t, bo, []uint16{2, 5})
	binary.Write(&t, bo, uint32(3))
	binary.Write(&t, bo, uint32(rat))
	binary.Write(&t, bo, uint32(0))
	binary.Write(&t, bo, []uint32{48, 1, 51, 1, 30, 1})
	return append([]byte("Exif\x00\x00"), t.Bytes()...)
}

// withEXIF inserts an APP1 segment holding block after the SOI of a JPEG.
func withEXIF(jpg, block []byte) []byte {
	seg := []byte{0xFF, 0xE1, 0, 0}
	binary.BigEndian.PutUint16(seg[2:], uint16(2+len(block)))
	out := append([]byte{}, jpg[:2]...)
	out = append(out, seg...)
	out = append(out, block...)
	return append(out, jpg[2:]...)
}

// gpsMarker is a byte string of exifBlock's GPS IFD: its latitude rationals.
var gpsMarker = []byte{0, 0, 0, 48, 0, 0, 0, 1, 0, 0, 0, 51}

func errorsIsTooLarge(err error) bool { return errors.Is(err, ErrTooLarge) }
