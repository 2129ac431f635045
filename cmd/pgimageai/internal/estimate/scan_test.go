package estimate

import (
	"bytes"
	"image"
	"image/png"
	"testing"
)

// TestScanAdd: a NULL image is read but not counted as one; an image of no
// known format, or whose header gives no size, makes no call; a readable
// one is counted with its size and stored length.
func TestScanAdd(t *testing.T) {
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 64, 40))); err != nil {
		t.Fatal(err)
	}
	pngHead := b.Bytes()
	var s Scan
	s.Add(nil, 0)                       // NULL
	s.Add([]byte("not an image"), 12)   // unknown format
	s.Add(pngHead[:8], 8)               // a PNG signature without its header
	s.Add(pngHead, int64(len(pngHead))) // readable
	s.Add(pngHead[:33], 5000)           // signature and IHDR: the size, and the length as stored
	if s.Read != 5 || s.WithImage != 4 || s.Unknown != 2 {
		t.Errorf("read %d, with an image %d, unknown %d; want 5, 4, 2", s.Read, s.WithImage, s.Unknown)
	}
	if len(s.Sizes) != 2 || s.Sizes[0] != image.Pt(64, 40) || s.Sizes[1] != image.Pt(64, 40) {
		t.Errorf("sizes %v, want two of 64x40", s.Sizes)
	}
	if len(s.Bytes) != 2 || s.Bytes[0] != int64(len(pngHead)) || s.Bytes[1] != 5000 {
		t.Errorf("bytes %v, want %d and 5000", s.Bytes, len(pngHead))
	}
}
