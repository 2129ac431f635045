package functions

import (
	"bytes"
	"context"
	"image"
	"image/jpeg"
	"os"
	"strings"
	"testing"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/normalize"
	"github.com/pgimageai/pgimageai/normalize/normtest"
	"github.com/pgimageai/pgimageai/provider"
)

// sized is a text generator with a documented size rule, as openai's
// detail high.
type sized struct {
	textOnly
	size normalize.Size
}

func (p sized) ImageSize() normalize.Size { return p.size }

// TestCallNormalizes: what the provider receives — upright, at the size
// its rule names, without EXIF — and a HEIC sent as JPEG.
func TestCallNormalizes(t *testing.T) {
	heic, err := os.ReadFile("../normalize/testdata/gradient.heic")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		img          []byte
		options      string
		wantMIME     string
		wantW, wantH int
		stored       bool
		upright      bool
	}{
		{"sideways 12 MP-like photo", normtest.SidewaysJPEG(t, 2016, 1512), "", "image/jpeg", 768, 1024, false, true},
		{"sideways, normalize off", normtest.SidewaysJPEG(t, 2016, 1512), `{"normalize": false}`, "image/jpeg", 2016, 1512, true, false},
		{"max side option", normtest.SidewaysJPEG(t, 2016, 1512), `{"normalize_max_side": 400}`, "image/jpeg", 300, 400, false, true},
		{"heic", heic, "", "image/jpeg", 64, 48, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got provider.Image
			fk := &fake{text: func(img provider.Image, _ string) (provider.Completion, error) {
				got = img
				return provider.Completion{Text: "ok"}, nil
			}}
			f, err := Bind(Complete, "m", sized{textOnly{fk}, normalize.OpenAIHigh}, opts(t, tc.options), ptr("p"))
			if err != nil {
				t.Fatal(err)
			}
			mem := f.CallMemory(tc.img)
			if _, err := f.Call(context.Background(), tc.img, true); err != nil {
				t.Fatal(err)
			}
			if got.MIME != tc.wantMIME {
				t.Fatalf("MIME %s, want %s", got.MIME, tc.wantMIME)
			}
			if tc.stored {
				if !bytes.Equal(got.Data, tc.img) || mem != 0 {
					t.Fatalf("not sent as stored (memory charged %d)", mem)
				}
				return
			}
			if mem <= 0 {
				t.Errorf("CallMemory = %d for a normalisation", mem)
			}
			if bytes.Contains(got.Data, []byte("Exif")) {
				t.Fatal("EXIF reached the provider")
			}
			m, _, err := image.Decode(bytes.NewReader(got.Data))
			if err != nil {
				t.Fatal(err)
			}
			if m.Bounds().Dx() != tc.wantW || m.Bounds().Dy() != tc.wantH {
				t.Fatalf("provider got %v, want %dx%d", m.Bounds(), tc.wantW, tc.wantH)
			}
			if tc.upright { // turned clockwise: red on top, blue below
				r, _, b, _ := m.At(tc.wantW/2, tc.wantH/4).RGBA()
				r2, _, b2, _ := m.At(tc.wantW/2, 3*tc.wantH/4).RGBA()
				if r < b || b2 < r2 {
					t.Fatalf("not upright: top (r %d b %d) bottom (r %d b %d)", r>>8, b>>8, r2>>8, b2>>8)
				}
			}
		})
	}
}

// TestInputVersion: the fingerprint follows every setting that changes the
// bytes sent, defaults spelt out or not.
func TestInputVersion(t *testing.T) {
	fk := &fake{}
	bind := func(o string, size normalize.Size) string {
		f, err := Bind(Complete, "m", sized{textOnly{fk}, size}, opts(t, o), ptr("p"))
		if err != nil {
			t.Fatal(err)
		}
		return f.InputVersion()
	}
	base := bind("", normalize.OpenAIHigh)
	if !strings.HasPrefix(base, normalize.Version) {
		t.Fatalf("InputVersion %q lacks the version", base)
	}
	if bind(`{"jpeg_quality": 90, "normalize": true}`, normalize.OpenAIHigh) != base {
		t.Error("defaults spelt out changed the version")
	}
	for _, o := range []string{`{"normalize": false}`, `{"jpeg_quality": 80}`, `{"normalize_max_side": 1000}`, `{"formats": ["image/png"]}`} {
		if bind(o, normalize.OpenAIHigh) == base {
			t.Errorf("%s kept the version", o)
		}
	}
	if bind("", normalize.OpenAILow) == base {
		t.Error("another size rule kept the version")
	}
}

// memFake is a text generator that decodes what it is sent (as the local
// provider does) and says it holds 7 bytes for any image.
type memFake struct{ textOnly }

func (memFake) CallMemory([]byte) int64 { return 7 }

// TestCallMemoryOfNormalized: a provider that decodes is charged for the
// image it will be sent — the converted one — not for the stored bytes,
// which it may not even read.
func TestCallMemoryOfNormalized(t *testing.T) {
	heic, err := os.ReadFile("../normalize/testdata/gradient.heic")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Bind(Complete, "m", memFake{textOnly{&fake{}}}, opts(t, ""), ptr("p"))
	if err != nil {
		t.Fatal(err)
	}
	stored := jpegOf(t, 40, 30)
	if got := f.CallMemory(stored); got != 7 {
		t.Errorf("an image sent as stored: CallMemory %d, want the provider's 7", got)
	}
	want := normalize.Memory(heic, magic.HEIF, f.norm) + 8*64*48 + 1<<20
	if got := f.CallMemory(heic); got != want {
		t.Errorf("a HEIC: CallMemory %d, want %d (the normalisation and a decode of the 64x48 it sends)", got, want)
	}
}

func jpegOf(t testing.TB, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, image.NewRGBA(image.Rect(0, 0, w, h)), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestInputVersionIsTheFingerprint: the version a function gives is its
// settings' fingerprint, computed once when it was bound.
func TestInputVersionIsTheFingerprint(t *testing.T) {
	f, err := Bind(Complete, "m", sized{textOnly{&fake{}}, normalize.OpenAIHigh}, opts(t, `{"jpeg_quality": 70}`), ptr("p"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := f.InputVersion(), f.norm.Fingerprint(); got != want || got == "" {
		t.Fatalf("input version %q, want the settings' fingerprint %q", got, want)
	}
}

// BenchmarkInputVersion is what work.KeyFor pays per row for the
// function's input version (a fmt.Sprintf and a SHA-256 when it was
// computed per call, about 6 µs).
func BenchmarkInputVersion(b *testing.B) {
	f, err := Bind(Complete, "m", sized{textOnly{&fake{}}, normalize.OpenAIHigh}, opts(b, ""), ptr("p"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = f.InputVersion()
	}
}
