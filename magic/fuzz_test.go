package magic

import (
	"bytes"
	"errors"
	"testing"
)

// reference is an independent, deliberately naive statement of SPEC §3's
// detection rules that the fuzzer compares Detect against.
func reference(b []byte) (Format, error) {
	if len(b) == 0 {
		return 0, ErrEmpty
	}
	has := func(off int, sig string) bool {
		return len(b) >= off+len(sig) && string(b[off:off+len(sig)]) == sig
	}
	switch {
	case has(0, "\x89PNG\r\n\x1a\n"):
		return PNG, nil
	case has(0, "\xff\xd8\xff"):
		return JPEG, nil
	case has(0, "GIF87a") || has(0, "GIF89a"):
		return GIF, nil
	case has(0, "RIFF") && has(8, "WEBP"):
		return WebP, nil
	}
	return 0, ErrUnknownFormat
}

func FuzzDetect(f *testing.F) {
	for _, tc := range cases {
		if len(tc.in) < 1024 {
			f.Add(tc.in)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := Detect(b)
		want, wantErr := reference(b)
		if got != want || !errors.Is(err, wantErr) || (err == nil) != (wantErr == nil) {
			t.Fatalf("Detect(%x) = %v, %v; reference %v, %v", b, got, err, want, wantErr)
		}
		if err == nil {
			url := DataURL(got, b)
			if !bytes.HasPrefix([]byte(url), []byte("data:"+got.MIME()+";base64,")) {
				t.Fatalf("DataURL prefix wrong: %.40s", url)
			}
		}
	})
}
