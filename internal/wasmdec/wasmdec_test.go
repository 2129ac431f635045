package wasmdec

import (
	"context"
	"errors"
	"image"
	"os"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/normalize/normtest"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../../normalize/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type decodeFunc func(context.Context, []byte, int64) (image.Image, error)

// TestDecode: the fixtures decode to their size within a small limit, and
// fail, naming the limit, within one too small for them.
func TestDecode(t *testing.T) {
	tests := []struct {
		name   string
		file   string
		decode decodeFunc
	}{
		{"heif", "gradient.heic", HEIF},
		{"avif", "gradient.avif", AVIF},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := fixture(t, tc.file)
			before := TotalLinear()
			m, err := tc.decode(context.Background(), data, 64<<20)
			if err != nil {
				t.Fatal(err)
			}
			if b := m.Bounds(); b.Dx() != 64 || b.Dy() != 48 {
				t.Fatalf("bounds %v", b)
			}
			used := TotalLinear() - before
			t.Logf("linear memory %d KiB", used>>10)
			// A page less than it took is refused: the memory did not grow.
			_, err = tc.decode(context.Background(), data, used-pageSize)
			if !errors.Is(err, ErrMemoryLimit) {
				t.Fatalf("with %d bytes: err %v, want ErrMemoryLimit", used-pageSize, err)
			}
		})
	}
}

// TestDecodeEndsWithContext: a decode still running when its context ends
// (the HEIC coded at 4096 × 4096, given a gibibyte: some 7 s of libde265
// here) is ended within moments, its error the context's.
func TestDecodeEndsWithContext(t *testing.T) {
	tests := []struct {
		name, file string
		img        []byte
		decode     decodeFunc
	}{
		{"avif", "gradient.avif", normtest.AVIF(64, 64, 4096, 4096), AVIF},
		{"heic", "gradient.heic", normtest.HEIC(64, 64, 4096, 4096), HEIF},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The module's one-time compile (seconds under -race) is not part of
			// a decode's deadline: done first, with a fixture.
			if _, err := tc.decode(context.Background(), fixture(t, tc.file), 64<<20); err != nil {
				t.Fatal(err)
			}
			// 30 ms: well inside the AVIF bomb's ~200 ms of work before libaom gives up on
			// its bitstream, so that the deadline, not the bitstream, ends it.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := tc.decode(ctx, tc.img, 1<<30)
			took := time.Since(start)
			if !errors.Is(err, context.DeadlineExceeded) || took > 3*time.Second {
				t.Fatalf("err %v after %s, want the deadline within moments", err, took)
			}
		})
	}
}
