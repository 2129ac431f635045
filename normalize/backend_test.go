package normalize

import (
	"bytes"
	"context"
	"image"
	"image/gif"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/pgimageai/pgimageai/magic"
)

// TestBackendPresent: under CI the libvips backend is built and reads all
// three of its formats, so that its tests cannot pass by running the pure-Go
// path instead (a CGO_ENABLED=0 build, or a libvips without its HEIF module).
func TestBackendPresent(t *testing.T) {
	t.Logf("backend: %s", Backend())
	if os.Getenv("CI") != "true" {
		if !vipsBuilt {
			t.Log("built without libvips (CGO_ENABLED=0 or -tags nodynamic): the pure-Go path runs")
		}
		return
	}
	if !vipsBuilt {
		t.Fatal("CI=true but built without libvips: install libvips-dev and build with cgo")
	}
	for _, f := range []magic.Format{magic.JPEG, magic.HEIF, magic.AVIF} {
		if !vipsHandles(f) {
			t.Errorf("libvips does not read %s here (%s): install libvips' HEIF module and libheif's decoders", f, Backend())
		}
	}
}

// TestVipsFormats: real files through libvips: the size sent, the format,
// what is said to be done, and no metadata left.
func TestVipsFormats(t *testing.T) {
	if !vipsBuilt {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but built without libvips")
		}
		t.Skip("built without libvips")
	}
	big := withEXIF(encodeJPEG(t, quadrants(4000, 3000)), exifBlock(6))
	tests := []struct {
		name        string
		img         []byte
		s           Settings
		w, h        int
		out         magic.Format
		changes     string // a part of Changes
		notInOutput string
	}{
		{"jpeg turned and shrunk", big, photos, 768, 1024, magic.JPEG, "EXIF orientation 6 applied; 4000x3000 → 768x1024", "Exif"},
		{"jpeg to png only", big, Settings{Enabled: true, Size: OpenAILow, Accept: []magic.Format{magic.PNG}}, 384, 512, magic.PNG, "re-encoded as PNG", "Exif"},
		{"heic", readFile(t, "testdata/gradient.heic"), photos, 64, 48, magic.JPEG, "HEIF re-encoded as JPEG", "Exif"},
		{"avif", readFile(t, "testdata/gradient.avif"), photos, 64, 48, magic.JPEG, "AVIF re-encoded as JPEG", "Exif"},
		{"heic shrunk", readFile(t, "testdata/gradient.heic"), Settings{Enabled: true, Size: Size{MaxSide: 32}, Accept: []magic.Format{magic.JPEG}}, 32, 24, magic.JPEG, "64x48 → 32x24", "Exif"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := magic.Detect(tc.img)
			if err != nil {
				t.Fatal(err)
			}
			if !vipsHandles(f) {
				t.Fatalf("libvips does not read %s here", f)
			}
			r, err := Image(context.Background(), tc.img, f, tc.s)
			if err != nil {
				t.Fatal(err)
			}
			if r.Width != tc.w || r.Height != tc.h || r.Format != tc.out || !r.Changed {
				t.Fatalf("got %dx%d %s changed %v, want %dx%d %s", r.Width, r.Height, r.Format, r.Changed, tc.w, tc.h, tc.out)
			}
			if !strings.Contains(r.Changes, tc.changes) {
				t.Errorf("changes %q, want %q in it", r.Changes, tc.changes)
			}
			if got, err := magic.Detect(r.Data); err != nil || got != tc.out {
				t.Errorf("output is %s (%v), want %s", got, err, tc.out)
			}
			m := decodeOut(t, r)
			if b := m.Bounds(); b.Dx() != tc.w || b.Dy() != tc.h {
				t.Errorf("output decodes to %v, want %dx%d", b, tc.w, tc.h)
			}
			if bytes.Contains(r.Data, []byte(tc.notInOutput)) {
				t.Errorf("%q survived", tc.notInOutput)
			}
			w, h, re := Sent(tc.img, f, tc.s)
			if w != tc.w || h != tc.h || !re {
				t.Errorf("Sent %dx%d %v, want %dx%d true", w, h, re, tc.w, tc.h)
			}
			if mem := Memory(tc.img, f, tc.s); mem < vipsFixed {
				t.Errorf("Memory %d, under libvips' fixed %d", mem, vipsFixed)
			}
		})
	}
}

// TestVipsRefusesBeforeDecoding: the header checks run before libvips sees
// a file: a decode over the byte bound and an HEIC coded larger than its
// ispe box are too large; a broken file names libvips.
func TestVipsRefusesBeforeDecoding(t *testing.T) {
	if !vipsBuilt {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but built without libvips")
		}
		t.Skip("built without libvips")
	}
	heic := readFile(t, "testdata/gradient.heic")
	tests := []struct {
		name   string
		img    []byte
		s      Settings
		tooBig bool
		naming string
	}{
		{"over the bound", encodeJPEG(t, quadrants(2000, 1000)), Settings{Enabled: true, Size: OpenAIHigh, Accept: magic.Formats, MaxDecodedBytes: 8 << 20}, true, "normalize_max_decoded_bytes"},
		{"truncated jpeg", encodeJPEG(t, quadrants(2000, 1000))[:3000], photos, false, "libvips"},
		{"truncated heic", heic[:len(heic)/2], photos, false, "libvips"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := magic.Detect(tc.img)
			_, err := Image(context.Background(), tc.img, f, tc.s)
			if err == nil {
				t.Fatal("no error")
			}
			if tc.tooBig != (err != nil && errorsIsTooLarge(err)) {
				t.Fatalf("err %v: too large %v, want %v", err, !tc.tooBig, tc.tooBig)
			}
			if !strings.Contains(err.Error(), tc.naming) {
				t.Fatalf("err %q does not name %q", err, tc.naming)
			}
		})
	}
}

// TestEstimateIsMemoryAndSent: Estimate's one header read says what Memory
// and Sent say, for images that need nothing, a strip, and a decode.
func TestEstimateIsMemoryAndSent(t *testing.T) {
	tests := []struct {
		name string
		img  []byte
	}{
		{"jpeg turned", withEXIF(encodeJPEG(t, quadrants(2000, 1000)), exifBlock(6))},
		{"small png", encodePNG(t, quadrants(64, 48))},
		{"jpeg with exif only", withEXIF(encodeJPEG(t, quadrants(64, 48)), exifBlock(1))},
		{"heic", readFile(t, "testdata/gradient.heic")},
		{"avif", readFile(t, "testdata/gradient.avif")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := magic.Detect(tc.img)
			if err != nil {
				t.Fatal(err)
			}
			mem, w, h, re := Estimate(tc.img, f, photos)
			sw, sh, sre := Sent(tc.img, f, photos)
			if want := Memory(tc.img, f, photos); mem != want || w != sw || h != sh || re != sre {
				t.Fatalf("Estimate %d %dx%d %v; Memory %d, Sent %dx%d %v", mem, w, h, re, want, sw, sh, sre)
			}
		})
	}
}

// TestOtherFormatsNeverOpenLibvips: in a process of its own (libvips, once
// open, stays open), PNGs and GIFs are normalised and estimated without
// libvips mapped, and the start-up line's name does not open it; the first
// JPEG then opens it and tells the hook.
func TestOtherFormatsNeverOpenLibvips(t *testing.T) {
	if os.Getenv("PGIMAGEAI_TEST_LAZY_VIPS") != "1" {
		if !vipsBuilt {
			if os.Getenv("CI") == "true" {
				t.Fatal("CI=true but built without libvips")
			}
			t.Skip("built without libvips")
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestOtherFormatsNeverOpenLibvips$", "-test.v")
		cmd.Env = append(os.Environ(), "PGIMAGEAI_TEST_LAZY_VIPS=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	mapped := func() bool {
		b, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			t.Fatal(err)
		}
		return bytes.Contains(b, []byte("libvips.so"))
	}
	var told []string
	OnBackendStart(func(b string) { told = append(told, b) })
	if so := BackendSoFar(); !strings.Contains(so, "at the first JPEG") {
		t.Errorf("BackendSoFar() = %q before any image", so)
	}
	big := Settings{Enabled: true, Size: Size{MaxSide: 32}, Accept: []magic.Format{magic.JPEG, magic.PNG}}
	for _, img := range [][]byte{encodePNG(t, quadrants(640, 480)), gifOf(t, quadrants(64, 48))} {
		f, err := magic.Detect(img)
		if err != nil {
			t.Fatal(err)
		}
		Estimate(img, f, big)
		if _, err := Image(context.Background(), img, f, big); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if mapped() || vipsStarted.Load() || len(told) != 0 {
		t.Fatalf("libvips opened by a PNG or GIF (mapped %v, started %v, told %q)", mapped(), vipsStarted.Load(), told)
	}
	jpg := encodeJPEG(t, quadrants(640, 480))
	if _, err := Image(context.Background(), jpg, magic.JPEG, big); err != nil {
		t.Fatal(err)
	}
	if !mapped() || len(told) != 1 || !strings.HasPrefix(told[0], "libvips ") || BackendSoFar() != told[0] {
		t.Fatalf("after a JPEG: mapped %v, told %q, so far %q", mapped(), told, BackendSoFar())
	}
}

func gifOf(tb testing.TB, m image.Image) []byte {
	tb.Helper()
	var b bytes.Buffer
	if err := gif.Encode(&b, m, nil); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}
