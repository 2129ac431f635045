package magic

import (
	"bytes"
	"errors"
	"testing"
)

// reference is an independent, deliberately naive statement of the detection rules'
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
	if len(b) >= 16 && has(4, "ftyp") {
		size := int(b[0])<<24 | int(b[1])<<16 | int(b[2])<<8 | int(b[3])
		if size >= 16 {
			end := min(size, 256, len(b))
			var heif, avif bool
			for off := 8; off+4 <= end; off += 4 {
				if off == 12 {
					continue // the minor version
				}
				for _, br := range []string{"heic", "heix", "mif1", "msf1"} {
					heif = heif || has(off, br)
				}
				avif = avif || has(off, "avif") || has(off, "avis")
			}
			if avif {
				return AVIF, nil
			}
			if heif {
				return HEIF, nil
			}
		}
	}
	switch {
	case has(0, "BM"):
		return BMP, nil
	case has(0, "II*\x00") || has(0, "MM\x00*"):
		return TIFF, nil
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
