package wasmdec

import (
	"context"
	"errors"
	"image"
	"os"
	"testing"
	"time"
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
			// The module's own data and stack are most of it: far less than the
			// limit, and refused under what it took.
			_, err = tc.decode(context.Background(), data, used/2)
			if !errors.Is(err, ErrMemoryLimit) {
				t.Fatalf("with %d bytes: err %v, want ErrMemoryLimit", used/2, err)
			}
		})
	}
}

// TestDecodeEndsWithContext: a decode whose context is done returns its
// error.
func TestDecodeEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	for _, d := range []decodeFunc{HEIF, AVIF} {
		if _, err := d(ctx, fixture(t, "gradient.heic"), 64<<20); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v", err)
		}
	}
}
