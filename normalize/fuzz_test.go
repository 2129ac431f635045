package normalize

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/pgimageai/pgimageai/magic"
)

// FuzzImage: whatever the bytes, Image neither panics nor allocates past its
// bound, and what it changes is a JPEG or PNG without EXIF.
func FuzzImage(f *testing.F) {
	for _, name := range []string{"gradient.png", "gradient.heic", "gradient.avif", "lossy.webp", "lossless.webp", "alpha.webp"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(withEXIF(encodeJPEG(f, quadrants(40, 30)), exifBlock(6)))
	f.Add(withEXIF(encodeJPEG(f, quadrants(40, 30)), exifBlock(0)))
	s := Settings{Enabled: true, Size: Size{MaxSide: 32}, Accept: []magic.Format{magic.PNG, magic.JPEG}, MaxDecodedBytes: 64 << 20}
	f.Fuzz(func(t *testing.T, b []byte) {
		format, err := magic.Detect(b)
		if err != nil {
			return
		}
		if Memory(b, format, s) < 0 {
			t.Fatal("negative memory")
		}
		r, err := Image(b, format, s)
		if err != nil || !r.Changed {
			return
		}
		if got, _ := magic.Detect(r.Data); got != r.Format || (got != magic.JPEG && got != magic.PNG) {
			t.Fatalf("changed into %v bytes labelled %v", got, r.Format)
		}
		if bytes.Contains(r.Data, []byte("Exif\x00\x00")) {
			t.Fatal("EXIF survived")
		}
	})
}
