package normalize

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/internal/wasmdec"
	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/normalize/normtest"
)

// small is a model's settings under which every image here is decoded
// (scaled into 32 × 32).
var small = Settings{Enabled: true, Size: Size{MaxSide: 32}, Accept: []magic.Format{magic.JPEG, magic.PNG}}

// TestCodedSizeChecked: a HEIC or AVIF whose coded size passes its ispe box
// is refused as too large before any decoder runs (no WebAssembly memory at
// all), naming both sizes; the same files coded as their ispe says decode.
func TestCodedSizeChecked(t *testing.T) {
	tests := []struct {
		name    string
		img     []byte
		wantErr bool
	}{
		{"heic as its ispe says", normtest.HEIC(64, 64, 64, 64), false},
		{"heic 64x64 coded 4096x4096", normtest.HEIC(64, 64, 4096, 4096), true},
		{"heic 64x64 coded 4096x64", normtest.HEIC(64, 64, 4096, 64), true},
		{"avif as its ispe says", normtest.AVIF(64, 48, 64, 48), false},
		{"avif 64x64 coded 4096x4096", normtest.AVIF(64, 64, 4096, 4096), true},
		{"avif 64x48 coded 64x4096", normtest.AVIF(64, 48, 64, 4096), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := magic.Detect(tc.img)
			if err != nil {
				t.Fatal(err)
			}
			before := wasmdec.TotalLinear()
			r, err := Image(context.Background(), tc.img, f, small)
			used := wasmdec.TotalLinear() - before
			if !tc.wantErr {
				if err != nil || !r.Changed {
					t.Fatalf("changed %v, err %v", r.Changed, err)
				}
				return
			}
			if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "ispe box says") {
				t.Fatalf("err %v, want too large, naming the ispe box", err)
			}
			if used != 0 {
				t.Fatalf("%d bytes of WebAssembly memory used for a file refused from its header", used)
			}
			if Memory(tc.img, f, small) != 0 {
				t.Fatal("Memory charges a file that is refused")
			}
			t.Logf("%d bytes: %v", len(tc.img), err)
		})
	}
}

// TestWasmMemoryCapped: whatever a file's header says, a decoder's memory
// grows no further than what normalize allowed for it: the AVIF bomb of
// under a kilobyte, decoded past the header checks (straight through
// decode) with the limit a 64 × 64 image gets, is stopped, a too_large
// error; the same file without a limit takes more.
func TestWasmMemoryCapped(t *testing.T) {
	tests := []struct {
		name      string
		img, half []byte
	}{
		{"avif 64x64 coded 4096x4096", normtest.AVIF(64, 64, 4096, 4096), normtest.AVIF(64, 64, 2048, 2048)},
		{"heic 64x64 coded 4096x4096", normtest.HEIC(64, 64, 4096, 4096), normtest.HEIC(64, 64, 2048, 2048)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := magic.Detect(tc.img)
			h := header{width: 64, height: 64}
			limit := wasmLimit(f, tc.img, 64*64)
			before := wasmdec.TotalLinear()
			_, err := decode(context.Background(), tc.img, f, h, 0, 1<<40, limit)
			used := wasmdec.TotalLinear() - before
			t.Logf("%d bytes: limit %.1f MiB, used %.1f MiB: %v", len(tc.img), float64(limit)/(1<<20), float64(used)/(1<<20), err)
			if used > limit {
				t.Fatalf("used %d bytes of linear memory, over the limit of %d", used, limit)
			}
			if !errors.Is(err, ErrTooLarge) || !errors.Is(err, wasmdec.ErrMemoryLimit) {
				t.Fatalf("err %v, want the decode stopped at its memory limit", err)
			}
			// Without the limit (a gibibyte) the same file coded at half
			// the size already takes more than the limit.
			before = wasmdec.TotalLinear()
			_, err = decode(context.Background(), tc.half, f, h, 0, 1<<40, 1<<30)
			unbounded := wasmdec.TotalLinear() - before
			t.Logf("coded 2048x2048, with a limit of 1 GiB: used %.1f MiB: %v", float64(unbounded)/(1<<20), err)
			if unbounded <= limit {
				t.Fatalf("with a limit of 1 GiB the bomb used %d bytes: no bomb", unbounded)
			}
		})
	}
}

// TestCodedSlack: an HEVC coded size within hevcSlack of the ispe box
// passes the check (HEVC codes whole coding blocks and crops the rest), one
// past it does not; an AV1 one may not pass its ispe at all.
func TestCodedSlack(t *testing.T) {
	tests := []struct {
		name    string
		img     []byte
		wantErr bool
	}{
		{"heic 64 coded 128", normtest.HEIC(64, 64, 128, 128), false},
		{"heic 64 coded 129", normtest.HEIC(64, 64, 129, 64), true},
		{"heic whose ispe has a side of 2^21", normtest.HEIC(1<<21, 64, 64, 64), true},
		{"avif 48 coded 48", normtest.AVIF(64, 48, 64, 48), false},
		{"avif 48 coded 40", normtest.AVIF(64, 48, 64, 40), false},
		{"avif 48 coded 49", normtest.AVIF(64, 48, 64, 49), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := magic.Detect(tc.img)
			if _, err := checkCoded(f, tc.img); (err != nil) != tc.wantErr || (err != nil && !errors.Is(err, ErrTooLarge)) {
				t.Fatalf("err %v, want an error %v", err, tc.wantErr)
			}
		})
	}
	// What is charged follows the coded size, not the ispe box.
	exact, larger := normtest.HEIC(64, 64, 64, 64), normtest.HEIC(64, 64, 128, 128)
	if a, b := Memory(exact, magic.HEIF, small), Memory(larger, magic.HEIF, small); b-a < 12*(128*128-64*64) {
		t.Fatalf("Memory %d for 64x64 coded 128x128, %d coded 64x64: not charged for the coded size", b, a)
	}
}

// TestJPEGScansBounded: a progressive JPEG of more scans than the limit is
// refused before it is decoded, at once; one within it decodes.
func TestJPEGScansBounded(t *testing.T) {
	tests := []struct {
		name    string
		img     []byte
		s       Settings
		wantErr bool
	}{
		{"10 scans", normtest.ProgressiveJPEG(256, 10), small, false},
		{"100 scans, the default limit", normtest.ProgressiveJPEG(256, 100), small, false},
		{"101 scans", normtest.ProgressiveJPEG(256, 101), small, true},
		{"2,000 scans of 2048x2048", normtest.ProgressiveJPEG(2048, 2000), small, true},
		{"20 scans over a limit of 10", normtest.ProgressiveJPEG(256, 20), withScans(small, 10), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := Image(context.Background(), tc.img, magic.JPEG, tc.s)
			took := time.Since(start)
			if !tc.wantErr {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "scans") {
				t.Fatalf("err %v, want too large naming the scans", err)
			}
			if took > time.Second {
				t.Fatalf("refused after %s", took)
			}
			t.Logf("%d bytes: %v (%s)", len(tc.img), err, took)
		})
	}
}

func withScans(s Settings, n int) Settings { s.MaxJPEGScans = n; return s }

// TestJPEGScans counts scans past stuffed bytes and restart markers.
func TestJPEGScans(t *testing.T) {
	tests := []struct {
		name string
		img  []byte
		want int
	}{
		{"baseline", encodeJPEG(t, quadrants(40, 30)), 1},
		{"progressive of 7", normtest.ProgressiveJPEG(64, 7), 7},
		{"stuffed and restart", []byte{0xFF, 0xD8, 0xFF, 0xDA, 0, 2, 0xFF, 0x00, 0xFF, 0xD0, 1, 0xFF, 0xDA, 0, 2, 0xFF, 0xFF, 0xDA, 0, 2, 0xFF, 0xD9}, 3},
		{"truncated", []byte{0xFF, 0xD8, 0xFF, 0xDA, 0, 2, 1, 2}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := JPEGScans(tc.img); got != tc.want {
				t.Fatalf("%d scans, want %d", got, tc.want)
			}
		})
	}
}

// TestJPEGPixelsPerByte: a JPEG that claims more pixels than its bytes can
// hold is refused before it is decoded.
func TestJPEGPixelsPerByte(t *testing.T) {
	img := normtest.ProgressiveJPEG(8192, 1)[:200] // a header claiming 8192 x 8192, and 200 bytes
	_, err := Image(context.Background(), img, magic.JPEG, Settings{Enabled: true, Size: Size{MaxSide: 32}, Accept: []magic.Format{magic.JPEG}, MaxDecodedBytes: 1 << 40})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "pixels a byte") {
		t.Fatalf("err %v, want too large naming the pixels a byte", err)
	}
}

// TestDecodeDeadline: a decode that runs past the settings' deadline is
// stopped, a too_large error naming the option; the end of the caller's
// context is its own error.
func TestDecodeDeadline(t *testing.T) {
	bomb := normtest.ProgressiveJPEG(2048, 2000)
	s := small
	s.MaxJPEGScans = 10000
	s.DecodeTimeout = 100 * time.Millisecond
	start := time.Now()
	_, err := Image(context.Background(), bomb, magic.JPEG, s)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("stopped after %s", took)
	}
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "normalize_decode_timeout") {
		t.Fatalf("err %v, want too large naming normalize_decode_timeout", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	s.DecodeTimeout = time.Minute
	if _, err := Image(ctx, bomb, magic.JPEG, s); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrTooLarge) {
		t.Fatalf("err %v, want the caller's deadline", err)
	}
	// A WebAssembly decode ends with its context too.
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := Image(ctx, normtest.HEIC(64, 64, 64, 64), magic.HEIF, small); !errors.Is(err, context.Canceled) {
		t.Fatalf("heic: err %v, want context.Canceled", err)
	}
}

// TestUnverifiableRefused: a HEIF or AVIF file whose coded size cannot be
// read is a decoder error (unsupported_format), and no decoder runs.
func TestUnverifiableRefused(t *testing.T) {
	heic, avif := normtest.HEIC(64, 64, 64, 64), normtest.AVIF(64, 48, 64, 48)
	replace := func(b []byte, old, new string) []byte {
		return bytes.Replace(bytes.Clone(b), []byte(old), []byte(new), 1)
	}
	avis := replace(avif, "ftypavif", "ftypavis")
	avis = append(avis, 0, 0, 0, 8, 'm', 'o', 'o', 'v')
	tests := []struct {
		name string
		img  []byte
		want string
	}{
		{"heic without hvcC", replace(heic, "hvcC", "hvcc"), "no hvcC property"},
		{"heic without ispe", replace(heic, "ispe", "ispf"), "no ispe property"},
		{"heic cut in its mdat", heic[:len(heic)-20], "outside the file"},
		{"heic of another item type", replace(heic, "hvc1", "jpeg"), `of type "jpeg"`},
		{"avif without av1C", replace(avif, "av1C", "av1c"), "no av1C property"},
		{"avif without a sequence header", replace(avif, "\x12\x00\x0a", "\x12\x00\x7a"), "no sequence header"},
		{"avif sequence", avis, "image sequence"},
		{"avif with a moov box, major brand mif1", append(replace(avif, "ftypavif", "ftypmif1"), 0, 0, 0, 8, 'm', 'o', 'o', 'v'), "image sequence"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := magic.Detect(tc.img)
			if err != nil {
				t.Fatal(err)
			}
			before := wasmdec.TotalLinear()
			_, err = Image(context.Background(), tc.img, f, small)
			var de *DecodeError
			if !errors.As(err, &de) || !errors.Is(err, errUnverifiable) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want a decoder error naming %q", err, tc.want)
			}
			if used := wasmdec.TotalLinear() - before; used != 0 {
				t.Fatalf("%d bytes of WebAssembly memory used", used)
			}
		})
	}
}
