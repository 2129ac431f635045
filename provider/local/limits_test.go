package local

import (
	"image"
	"testing"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/provider"
)

func TestDecodedBytes(t *testing.T) {
	const w, h = 1000, 800
	px := int64(w * h)
	tests := []struct {
		name   string
		format magic.Format
		data   []byte
		want   int64 // bytes of pixels, decoderBytes and rows aside
	}{
		{"PNG grey", magic.PNG, craftPNG(1, 1, 8, 0, false, false), px},
		{"PNG grey with tRNS decodes to NRGBA", magic.PNG, craftPNG(1, 1, 8, 0, false, true), 4 * px},
		{"PNG grey 16", magic.PNG, craftPNG(1, 1, 16, 0, false, false), 2 * px},
		{"PNG RGB decodes to RGBA", magic.PNG, craftPNG(1, 1, 8, 2, false, false), 4 * px},
		{"PNG RGBA 16", magic.PNG, craftPNG(1, 1, 16, 6, false, false), 8 * px},
		{"PNG interlaced, twice", magic.PNG, craftPNG(1, 1, 8, 6, true, false), 8 * px},
		{"PNG unreadable: the worst", magic.PNG, []byte("\x89PNG\r\n\x1a\n"), 16 * px},
		{"GIF", magic.GIF, gifHeader(w, h), 2 * px},
		{"WebP lossless", magic.WebP, craftVP8L(w, h), 7 * px},
		{"WebP unreadable: the worst", magic.WebP, []byte("RIFF\x00\x00\x00\x00WEBP"), 1008*800*3/2 + 15*px},
		{"JPEG baseline 4:2:0", magic.JPEG, baselineJPEGHeader(w, h), 1008 * 800 * 3 / 2},
		{"JPEG progressive 4:4:4", magic.JPEG, craftProgressiveJPEG(w, h, 3, 1), 15 * px},
		{"JPEG progressive grey", magic.JPEG, craftProgressiveJPEG(w, h, 1, 1), 5 * px},
		{"JPEG unreadable: the worst", magic.JPEG, []byte{0xFF, 0xD8}, 28 * px},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decodedBytes(tt.format, tt.data, w, h) - decoderBytes
			if got < tt.want || got > tt.want+int64(64<<10) {
				t.Errorf("decodedBytes = %d (+ %d), want %d (+ rows)", got, decoderBytes, tt.want)
			}
		})
	}
}

// FuzzLimits feeds arbitrary headers and sizes to the limit checks: they
// never panic; an image they let through is within every limit; the
// estimate is at least a byte a pixel and grows with the image.
func FuzzLimits(f *testing.F) {
	f.Add(craftPNG(3, 2, 8, 6, true, true), uint8(0), uint16(5000), uint16(3))
	f.Add(craftPNG(3, 2, 16, 0, false, false), uint8(0), uint16(16384), uint16(16384))
	f.Add(gifHeader(10, 10), uint8(2), uint16(7000), uint16(7000))
	f.Add(craftVP8L(4, 4), uint8(3), uint16(2700), uint16(2700))
	f.Add(readFixture(f, "alpha.webp").Data, uint8(3), uint16(100), uint16(100))
	f.Add(baselineJPEGHeader(8, 8), uint8(1), uint16(5760), uint16(5760))
	f.Add(craftProgressiveJPEG(16, 16, 3, 2), uint8(1), uint16(3000), uint16(1))
	f.Add([]byte{0xFF, 0xD8, 0xFF, 0xEE, 0, 14, 'A', 'd', 'o', 'b', 'e', 0, 0, 0, 0, 0, 0, 0}, uint8(1), uint16(1), uint16(1))
	limits := Limits{MaxPixels: DefaultMaxPixels, MaxSide: DefaultMaxSide, MaxAspect: DefaultMaxAspect, MaxDecodedBytes: DefaultMaxDecodedBytes}
	f.Fuzz(func(t *testing.T, data []byte, format uint8, w16, h16 uint16) {
		f := magic.Formats[int(format)%len(magic.Formats)]
		w, h := int(w16)+1, int(h16)+1
		need := decodedBytes(f, data, w, h)
		if px := int64(w) * int64(h); need < px || need <= 0 {
			t.Fatalf("%s %dx%d: estimate %d, under a byte a pixel", f, w, h, need)
		}
		if bigger := decodedBytes(f, data, w+1, h+1); bigger < need {
			t.Fatalf("%s: estimate of %dx%d %d, of %dx%d %d", f, w, h, need, w+1, h+1, bigger)
		}
		if limits.check(f, data, w, h) != nil {
			return
		}
		long, short := max(w, h), min(w, h)
		if long > limits.MaxSide || float64(long) > limits.MaxAspect*float64(short) ||
			int64(w)*int64(h) > limits.MaxPixels || need > limits.MaxDecodedBytes {
			t.Fatalf("%s %dx%d (estimate %d) let through", f, w, h, need)
		}
	})
}

func TestCallMemory(t *testing.T) {
	p, err := New(provider.Model{Name: "m", Provider: "local", Model: "m"}, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	small := encodePNG(t, image.NewRGBA(image.Rect(0, 0, 100, 100))).Data
	big := encodePNG(t, image.NewRGBA(image.Rect(0, 0, 1000, 1000))).Data
	s, b := p.CallMemory(small), p.CallMemory(big)
	if s < 100*100*4 || b < 1000*1000*4 || b <= s {
		t.Errorf("CallMemory = %d for 100x100 and %d for 1000x1000 RGBA: want at least the decoded pixels, growing with them", s, b)
	}
	if n := p.CallMemory([]byte("not an image")); n != 0 {
		t.Errorf("CallMemory of garbage = %d, want 0 (it is never decoded)", n)
	}
}
