package normalize

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"image/png"
	"testing"

	"golang.org/x/image/webp"

	"github.com/pgimageai/pgimageai/magic"
)

// withPNGChunk inserts a chunk (PNG 1.2 §5.3: length, type, data, CRC-32 of
// type and data) after IHDR.
func withPNGChunk(img []byte, typ string, data []byte) []byte {
	chunk := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
	chunk = append(chunk, typ...)
	chunk = append(chunk, data...)
	chunk = binary.BigEndian.AppendUint32(chunk, crc32.ChecksumIEEE(chunk[4:]))
	at := 8 + 12 + 13 // signature, IHDR
	out := append(bytes.Clone(img[:at]), chunk...)
	return append(out, img[at:]...)
}

// extendedWebP wraps a simple (VP8) WebP's image chunk in the extended
// format (VP8X, https://developers.google.com/speed/webp/docs/riff_container)
// with an EXIF chunk after it, its flag set.
func extendedWebP(simple []byte, w, h int, exif []byte) []byte {
	vp8x := []byte("VP8X\x0a\x00\x00\x00\x08\x00\x00\x00")
	vp8x = append(vp8x, byte(w-1), byte((w-1)>>8), byte((w-1)>>16), byte(h-1), byte((h-1)>>8), byte((h-1)>>16))
	body := append([]byte("WEBP"), vp8x...)
	body = append(body, simple[12:]...)
	body = append(body, "EXIF"...)
	body = binary.LittleEndian.AppendUint32(body, uint32(len(exif)))
	body = append(body, exif...)
	if len(exif)%2 == 1 {
		body = append(body, 0)
	}
	out := append([]byte("RIFF"), binary.LittleEndian.AppendUint32(nil, uint32(len(body)))...)
	return append(out, body...)
}

// TestStripChunks: a PNG or WebP that needs nothing but carries EXIF (GPS)
// or text loses those chunks, the rest byte for byte, and still decodes.
func TestStripChunks(t *testing.T) {
	plainPNG := encodePNG(t, quadrants(32, 24))
	tiff := exifBlock(1)[len("Exif\x00\x00"):]
	lossy := readFile(t, "testdata/lossy.webp")
	cfg, err := webp.DecodeConfig(bytes.NewReader(lossy))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		img   []byte
		f     magic.Format
		plain []byte // what it must become; nil: check by decoding
	}{
		{"png eXIf", withPNGChunk(plainPNG, "eXIf", tiff), magic.PNG, plainPNG},
		{"png iTXt (XMP)", withPNGChunk(plainPNG, "iTXt", append([]byte("XML:com.adobe.xmp\x00\x00\x00\x00\x00"), tiff...)), magic.PNG, plainPNG},
		{"webp EXIF", extendedWebP(lossy, cfg.Width, cfg.Height, tiff), magic.WebP, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !bytes.Contains(tc.img, gpsMarker) {
				t.Fatal("fixture has no GPS")
			}
			if _, err := png.Decode(bytes.NewReader(tc.img)); tc.f == magic.PNG && err != nil {
				t.Fatalf("fixture: %v", err)
			}
			r, err := Image(context.Background(), tc.img, tc.f, photos)
			if err != nil {
				t.Fatal(err)
			}
			if !r.Changed || r.Format != tc.f || bytes.Contains(r.Data, gpsMarker) {
				t.Fatalf("changed %v format %v, GPS kept %v", r.Changed, r.Format, bytes.Contains(r.Data, gpsMarker))
			}
			if tc.plain != nil && !bytes.Equal(r.Data, tc.plain) {
				t.Fatal("not the image without the chunk")
			}
			if tc.f == magic.WebP {
				if binary.LittleEndian.Uint32(r.Data[4:])+8 != uint32(len(r.Data)) || r.Data[20]&0x08 != 0 {
					t.Fatal("RIFF size or VP8X EXIF flag not updated")
				}
				if _, err := webp.Decode(bytes.NewReader(r.Data)); err != nil {
					t.Fatalf("stripped WebP: %v", err)
				}
			}
		})
	}
}
