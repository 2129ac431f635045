package magic

import (
	"errors"
	"fmt"
	"testing"
)

// TestDetectShortPrefixes: every proper prefix of a format's signature is
// unknown_format, not the format — a 3-byte "\x89PN" is no PNG. The full
// signature is the format (the table in detect_test.go has the rest).
func TestDetectShortPrefixes(t *testing.T) {
	signatures := []struct {
		sig  []byte
		want Format
	}{
		{[]byte{0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A}, PNG},
		{[]byte{0xFF, 0xD8, 0xFF}, JPEG},
		{[]byte("GIF87a"), GIF},
		{[]byte("GIF89a"), GIF},
		{[]byte("RIFF\x00\x00\x00\x00WEBP"), WebP},
	}
	for _, s := range signatures {
		for n := 1; n < len(s.sig); n++ {
			t.Run(fmt.Sprintf("%s %d of %d bytes", s.want, n, len(s.sig)), func(t *testing.T) {
				if got, err := Detect(s.sig[:n]); !errors.Is(err, ErrUnknownFormat) || got != 0 {
					t.Fatalf("Detect(% x) = %v, %v; want unknown_format", s.sig[:n], got, err)
				}
			})
		}
		if got, err := Detect(s.sig); err != nil || got != s.want {
			t.Errorf("Detect(% x) = %v, %v; want %v", s.sig, got, err, s.want)
		}
	}
}
