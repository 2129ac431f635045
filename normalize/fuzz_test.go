package normalize

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/pgimageai/pgimageai/magic"
)

// FuzzImage: whatever the bytes, Image neither panics nor allocates past its
// bound, and what it changes is in a format the model accepts and needs
// nothing more (its metadata gone, upright, within the size).
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
	f.Add(extendedWebP(readFileF(f, "testdata/lossy.webp"), 32, 24, exifBlock(1)[6:]))
	settings := []Settings{
		{Enabled: true, Size: Size{MaxSide: 32}, Accept: []magic.Format{magic.PNG, magic.JPEG}, MaxDecodedBytes: 64 << 20},
		{Enabled: true, Size: Size{MaxSide: 4096}, Accept: magic.Formats, MaxDecodedBytes: 64 << 20}, // the lossless strips
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		format, err := magic.Detect(b)
		if err != nil {
			return
		}
		for _, s := range settings {
			if Memory(b, format, s) < 0 {
				t.Fatal("negative memory")
			}
			r, err := Image(context.Background(), b, format, s)
			if err != nil || !r.Changed {
				continue
			}
			if got, _ := magic.Detect(r.Data); got != r.Format || !s.accepts(got) {
				t.Fatalf("changed into %v bytes labelled %v", got, r.Format)
			}
			// What is sent needs nothing more: no metadata, upright, in size.
			again, err := Image(context.Background(), r.Data, r.Format, s)
			if err != nil || again.Changed {
				t.Fatalf("normalising the result again: changed %v (%s), err %v", again.Changed, again.Changes, err)
			}
		}
	})
}

func readFileF(f *testing.F, name string) []byte {
	b, err := os.ReadFile(name)
	if err != nil {
		f.Fatal(err)
	}
	return b
}
