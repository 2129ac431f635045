package normalize

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"testing"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"

	"github.com/pgimageai/pgimageai/magic"
)

var photos = Settings{Enabled: true, Size: OpenAIHigh, Accept: magic.Formats}

func decodeOut(tb testing.TB, r Result) image.Image {
	tb.Helper()
	var m image.Image
	var err error
	switch r.Format {
	case magic.JPEG:
		m, err = jpeg.Decode(bytes.NewReader(r.Data))
	case magic.PNG:
		m, err = png.Decode(bytes.NewReader(r.Data))
	default:
		tb.Fatalf("result format %v, want JPEG or PNG", r.Format)
	}
	if err != nil {
		tb.Fatal(err)
	}
	if m.Bounds().Dx() != r.Width || m.Bounds().Dy() != r.Height {
		tb.Fatalf("Result says %dx%d, the bytes hold %v", r.Width, r.Height, m.Bounds())
	}
	return m
}

// near: colours within a JPEG's error.
func near(a color.Color, b color.RGBA) bool {
	r, g, bl, _ := a.RGBA()
	d := func(x uint32, y uint8) bool { v := int(x>>8) - int(y); return v > -60 && v < 60 }
	return d(r, b.R) && d(g, b.G) && d(bl, b.B)
}

// TestOrientations: each EXIF orientation is applied as CIPA DC-008 defines
// it, stated here by where the stored image's first row and first column are
// shown (not by the code's formulas): 1 row 0 top, column 0 left; 2 top,
// right; 3 bottom, right; 4 bottom, left; 5 left, top; 6 right, top; 7
// right, bottom; 8 left, bottom.
func TestOrientations(t *testing.T) {
	const w, h = 96, 64
	stored := quadrants(w, h)
	tests := []struct {
		o          int
		row0, col0 string
	}{
		{1, "top", "left"}, {2, "top", "right"}, {3, "bottom", "right"}, {4, "bottom", "left"},
		{5, "left", "top"}, {6, "right", "top"}, {7, "right", "bottom"}, {8, "left", "bottom"},
	}
	for _, tc := range tests {
		t.Run(string(rune('0'+tc.o)), func(t *testing.T) {
			img := withEXIF(encodeJPEG(t, stored), exifBlock(tc.o))
			r, err := Image(context.Background(), img, magic.JPEG, photos)
			if err != nil {
				t.Fatal(err)
			}
			if !r.Changed {
				t.Fatal("sent as stored")
			}
			m := decodeOut(t, r)
			dw, dh := w, h
			if tc.row0 == "left" || tc.row0 == "right" {
				dw, dh = h, w
			}
			if m.Bounds().Dx() != dw || m.Bounds().Dy() != dh {
				t.Fatalf("shown %v, want %dx%d", m.Bounds(), dw, dh)
			}
			// Where the stored pixel (sx, sy) is shown.
			shown := func(sx, sy int) (int, int) {
				var x, y int
				switch tc.row0 { // the stored rows run along this edge
				case "top":
					y = sy
				case "bottom":
					y = dh - 1 - sy
				case "left":
					x = sy
				case "right":
					x = dw - 1 - sy
				}
				switch tc.col0 {
				case "left":
					x = sx
				case "right":
					x = dw - 1 - sx
				case "top":
					y = sx
				case "bottom":
					y = dh - 1 - sx
				}
				return x, y
			}
			for _, p := range []image.Point{{w / 4, h / 4}, {3 * w / 4, h / 4}, {w / 4, 3 * h / 4}, {3 * w / 4, 3 * h / 4}} {
				want := quadrantColour(p.X >= w/2, p.Y >= h/2)
				x, y := shown(p.X, p.Y)
				if got := m.At(x, y); !near(got, want) {
					t.Errorf("stored (%d,%d) %v shown at (%d,%d) as %v", p.X, p.Y, want, x, y, got)
				}
			}
			if bytes.Contains(r.Data, []byte("Exif\x00\x00")) {
				t.Error("EXIF block survived the re-encode")
			}
		})
	}
}

// TestNothingNeededIsStored: an image that needs nothing is the stored
// slice itself, byte for byte, and was not decoded (a body past the header
// that is not an image shows it).
func TestNothingNeededIsStored(t *testing.T) {
	small := encodeJPEG(t, quadrants(64, 48))
	corruptScan := append(bytes.Clone(small[:len(small)-40]), bytes.Repeat([]byte{0x55}, 40)...)
	tests := []struct {
		name string
		img  []byte
		f    magic.Format
	}{
		{"jpeg", small, magic.JPEG},
		{"jpeg whose scan would not decode", corruptScan, magic.JPEG},
		{"png", encodePNG(t, quadrants(64, 48)), magic.PNG},
		{"webp", readFile(t, "testdata/lossy.webp"), magic.WebP},
		{"jpeg at the bound", encodeJPEG(t, quadrants(1024, 768)), magic.JPEG},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Image(context.Background(), tc.img, tc.f, photos)
			if err != nil {
				t.Fatal(err)
			}
			if r.Changed || !bytes.Equal(r.Data, tc.img) || &r.Data[0] != &tc.img[0] {
				t.Fatalf("changed (%s)", r.Changes)
			}
			if m := Memory(tc.img, tc.f, photos); m != 0 {
				t.Errorf("Memory = %d, want 0", m)
			}
		})
	}
}

func readFile(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestGPSNeverSurvives: an image carrying EXIF GPS leaves without it,
// whether it was re-encoded (resized, turned) or needed nothing else (its
// metadata segments are removed, the scan kept byte for byte).
func TestGPSNeverSurvives(t *testing.T) {
	small := encodeJPEG(t, quadrants(64, 48))
	tests := []struct {
		name      string
		img       []byte
		keepsScan bool
	}{
		{"needs nothing else", withEXIF(small, exifBlock(0)), true},
		{"orientation 1", withEXIF(small, exifBlock(1)), true},
		{"turned", withEXIF(small, exifBlock(6)), false},
		{"resized", withEXIF(encodeJPEG(t, quadrants(2000, 1000)), exifBlock(1)), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !bytes.Contains(tc.img, gpsMarker) {
				t.Fatal("fixture has no GPS")
			}
			r, err := Image(context.Background(), tc.img, magic.JPEG, photos)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(r.Data, gpsMarker) || bytes.Contains(r.Data, []byte("Exif")) || bytes.Contains(r.Data, []byte("Cam\x00")) {
				t.Fatalf("EXIF survived (%s)", r.Changes)
			}
			if tc.keepsScan && !bytes.Equal(r.Data, small) {
				t.Fatalf("stripped JPEG is not the JPEG without its APP1 (%d vs %d bytes)", len(r.Data), len(small))
			}
			decodeOut(t, r)
		})
	}
}

// TestSizeRules: the size each provider's rule sends.
func TestSizeRules(t *testing.T) {
	tests := []struct {
		name         string
		s            Size
		w, h, ww, wh int
	}{
		{"openai high 12 MP", OpenAIHigh, 4032, 3024, 1024, 768},
		{"openai high portrait", OpenAIHigh, 3024, 4032, 768, 1024},
		{"openai high wide", OpenAIHigh, 4096, 1024, 2048, 512},
		{"openai high small", OpenAIHigh, 800, 600, 800, 600},
		{"openai low", OpenAILow, 4032, 3024, 512, 384},
		{"voyage", Voyage, 4032, 3024, 1632, 1225},
		{"cohere", Cohere, 4032, 3024, 1810, 1358},
		{"max side", MaxSide, 4032, 3024, 2048, 1536},
		{"none", Size{}, 4032, 3024, 4032, 3024},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, h := tc.s.Fit(tc.w, tc.h)
			if w != tc.ww || h != tc.wh {
				t.Fatalf("Fit(%d, %d) = %d, %d; want %d, %d", tc.w, tc.h, w, h, tc.ww, tc.wh)
			}
			if tc.s.MaxPixels > 0 && int64(w)*int64(h) > tc.s.MaxPixels {
				t.Fatalf("%d pixels over %d", w*h, tc.s.MaxPixels)
			}
		})
	}
}

// TestFormats: every format is converted when the model does not take it,
// to JPEG for lossy sources and PNG for lossless ones or alpha.
func TestFormats(t *testing.T) {
	var bmpBuf, tiffBuf bytes.Buffer
	if err := bmp.Encode(&bmpBuf, quadrants(64, 48)); err != nil {
		t.Fatal(err)
	}
	if err := tiff.Encode(&tiffBuf, quadrants(64, 48), nil); err != nil {
		t.Fatal(err)
	}
	noWebP := Settings{Enabled: true, Size: OpenAIHigh, Accept: []magic.Format{magic.PNG, magic.JPEG, magic.GIF}}
	tests := []struct {
		name    string
		img     []byte
		s       Settings
		want    magic.Format
		w, h    int
		colours bool // the quadrants fixture
	}{
		{"bmp", bmpBuf.Bytes(), photos, magic.PNG, 64, 48, true},
		{"tiff", tiffBuf.Bytes(), photos, magic.PNG, 64, 48, true},
		{"heic", readFile(t, "testdata/gradient.heic"), photos, magic.JPEG, 64, 48, false},
		{"avif", readFile(t, "testdata/gradient.avif"), photos, magic.JPEG, 64, 48, false},
		{"lossy webp to a model without webp", readFile(t, "testdata/lossy.webp"), noWebP, magic.JPEG, 0, 0, false},
		{"lossless webp", readFile(t, "testdata/lossless.webp"), noWebP, magic.PNG, 0, 0, false},
		{"webp with alpha stays transparent", readFile(t, "testdata/alpha.webp"), noWebP, magic.PNG, 0, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := magic.Detect(tc.img)
			if err != nil {
				t.Fatal(err)
			}
			r, err := Image(context.Background(), tc.img, f, tc.s)
			if err != nil {
				t.Fatal(err)
			}
			if !r.Changed || r.Format != tc.want {
				t.Fatalf("format %v changed %v, want %v", r.Format, r.Changed, tc.want)
			}
			if got, _ := magic.Detect(r.Data); got != tc.want {
				t.Fatalf("bytes are %v", got)
			}
			m := decodeOut(t, r)
			if tc.w != 0 && (m.Bounds().Dx() != tc.w || m.Bounds().Dy() != tc.h) {
				t.Fatalf("size %v", m.Bounds())
			}
			if tc.colours && !near(m.At(60, 44), color.RGBA{255, 255, 255, 255}) {
				t.Errorf("bottom right %v, want white", m.At(60, 44))
			}
			if mem := Memory(tc.img, f, tc.s); mem <= 0 {
				t.Errorf("Memory = %d for a conversion", mem)
			}
		})
	}
}

// TestDecoderErrors: a format no decoder reads, a broken file and a decode
// over the byte bound.
func TestDecoderErrors(t *testing.T) {
	heic := readFile(t, "testdata/gradient.heic")
	broken := bytes.Clone(heic[:len(heic)/2])
	tests := []struct {
		name   string
		img    []byte
		s      Settings
		want   error
		naming string
	}{
		{"truncated heic", broken, photos, nil, "libheif"},
		{"bmp header only", []byte("BM\x00\x00"), photos, nil, "golang.org/x/image/bmp"},
		{"over the bound", encodeJPEG(t, quadrants(2000, 1000)), Settings{Enabled: true, Size: OpenAIHigh, Accept: magic.Formats, MaxDecodedBytes: 1 << 20}, ErrTooLarge, "1.0 MiB"},
		{"no format to convert to", heic, Settings{Enabled: true, Accept: []magic.Format{magic.GIF}}, nil, "neither JPEG nor PNG"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := magic.Detect(tc.img)
			_, err := Image(context.Background(), tc.img, f, tc.s)
			if err == nil {
				t.Fatal("no error")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if !bytes.Contains([]byte(err.Error()), []byte(tc.naming)) {
				t.Fatalf("err %q does not name %q", err, tc.naming)
			}
		})
	}
}

// TestDisabled: normalisation off sends everything as stored.
func TestDisabled(t *testing.T) {
	img := withEXIF(encodeJPEG(t, quadrants(2000, 1000)), exifBlock(6))
	r, err := Image(context.Background(), img, magic.JPEG, Settings{Accept: magic.Formats, Size: OpenAIHigh})
	if err != nil || r.Changed || !bytes.Equal(r.Data, img) {
		t.Fatalf("changed %v err %v", r.Changed, err)
	}
}

func TestFingerprint(t *testing.T) {
	a := photos.Fingerprint()
	for _, s := range []Settings{
		{},
		{Enabled: true, Size: OpenAILow, Accept: magic.Formats},
		{Enabled: true, Size: OpenAIHigh, Accept: magic.Formats[:3]},
		{Enabled: true, Size: OpenAIHigh, Accept: magic.Formats, JPEGQuality: 80},
	} {
		if s.Fingerprint() == a {
			t.Errorf("%+v has the fingerprint of %+v", s, photos)
		}
	}
	same := photos
	same.JPEGQuality = DefaultJPEGQuality
	same.Accept = []magic.Format{magic.WebP, magic.GIF, magic.JPEG, magic.PNG}
	if same.Fingerprint() != a {
		t.Error("the defaults spelt out, or formats in another order, changed the fingerprint")
	}
}

// TestConcurrent: normalisations run at once on the calls' workers, the
// WebAssembly decoders included, and each gets its own image right.
func TestConcurrent(t *testing.T) {
	imgs := [][]byte{readFile(t, "testdata/gradient.heic"), readFile(t, "testdata/gradient.avif"), withEXIF(encodeJPEG(t, quadrants(96, 64)), exifBlock(8))}
	want := make([]Result, len(imgs))
	for i, img := range imgs {
		f, _ := magic.Detect(img)
		r, err := Image(context.Background(), img, f, photos)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = r
	}
	errs := make(chan error, 24)
	for g := range 24 {
		go func() {
			img := imgs[g%len(imgs)]
			f, _ := magic.Detect(img)
			r, err := Image(context.Background(), img, f, photos)
			if err == nil && !bytes.Equal(r.Data, want[g%len(imgs)].Data) {
				err = errors.New("a different result")
			}
			errs <- err
		}()
	}
	for range 24 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
