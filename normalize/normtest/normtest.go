// Package normtest makes test images for the tests of image normalisation in
// several packages (functions, integration): built in code, byte for byte the
// same every run.
//
// Layer: test.
package normtest

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"image/jpeg"
	"testing"
)

// SidewaysJPEG is a w × h JPEG (left half red, right half blue) whose APP1
// EXIF block (CIPA DC-008: "Exif\0\0", a big-endian TIFF header, IFD0) says
// Orientation 6 (turn a quarter clockwise to show it) and points to a GPS IFD
// holding GPSLatitudeRef "N": a phone photo held upright.
func SidewaysJPEG(tb testing.TB, w, h int) []byte {
	tb.Helper()
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			c := color.RGBA{255, 0, 0, 255}
			if x >= w/2 {
				c = color.RGBA{0, 0, 255, 255}
			}
			m.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: 90}); err != nil {
		tb.Fatal(err)
	}
	var t6 bytes.Buffer
	be := binary.BigEndian
	t6.WriteString("MM\x00*")
	binary.Write(&t6, be, []uint32{8})
	binary.Write(&t6, be, []uint16{2, 0x0112, 3})
	binary.Write(&t6, be, []uint32{1})
	binary.Write(&t6, be, []uint16{6, 0})
	binary.Write(&t6, be, []uint16{0x8825, 4})
	binary.Write(&t6, be, []uint32{1, 8 + 2 + 24 + 4, 0})
	binary.Write(&t6, be, []uint16{1, 1, 2})
	binary.Write(&t6, be, []uint32{2})
	t6.WriteString("N\x00\x00\x00")
	binary.Write(&t6, be, []uint32{0})
	block := append([]byte("Exif\x00\x00"), t6.Bytes()...)
	jpg := b.Bytes()
	out := append([]byte{}, jpg[:2]...)
	out = append(out, 0xFF, 0xE1, byte((len(block)+2)>>8), byte(len(block)+2))
	out = append(out, block...)
	return append(out, jpg[2:]...)
}
