package demo

import (
	"bytes"
	"context"
	"image"
	_ "image/gif"
	_ "image/jpeg"
	_ "image/png"
	"io"
	"testing"

	_ "golang.org/x/image/webp"

	"github.com/pgimageai/pgimageai/internal/wasmdec"
	"github.com/pgimageai/pgimageai/magic"
)

// TestDemoRows checks that the sample images are real, decodable images of
// the four formats and that the bad values are what the demo says.
func TestDemoRows(t *testing.T) {
	// HEIC through the product's own decoder, which registers nothing.
	image.RegisterFormat("heic", "????ftypheic", func(r io.Reader) (image.Image, error) {
		b, err := io.ReadAll(r)
		if err != nil {
			return nil, err
		}
		return wasmdec.HEIF(context.Background(), b, 64<<20)
	}, func(r io.Reader) (image.Config, error) {
		b, err := io.ReadAll(r)
		if err != nil {
			return image.Config{}, err
		}
		return wasmdec.HEIFConfig(context.Background(), b, 64<<20)
	})
	rows, err := sampleRows()
	if err != nil {
		t.Fatal(err)
	}
	wantFormat := map[string]string{
		"sky.png": "png", "red-square.jpg": "jpeg", "checkerboard.gif": "gif", "sun.webp": "webp",
		"sideways.jpg": "jpeg", "photo.heic": "heic",
	}
	bad := 0
	for _, r := range rows {
		if !r.Image {
			if r.Img != nil {
				bad++
			}
			if _, _, err := image.Decode(bytes.NewReader(r.Img)); err == nil {
				t.Errorf("%s decodes, but is meant to be a bad value", r.Name)
			}
			continue
		}
		_, format, err := image.Decode(bytes.NewReader(r.Img))
		if err != nil {
			t.Errorf("%s: %v", r.Name, err)
			continue
		}
		if format != wantFormat[r.Name] {
			t.Errorf("%s decodes as %s, want %s", r.Name, format, wantFormat[r.Name])
		}
		if _, err := magic.Detect(r.Img); err != nil {
			t.Errorf("%s: %v", r.Name, err)
		}
	}
	if bad != badSamples {
		t.Errorf("%d bad non-NULL values, badSamples = %d", bad, badSamples)
	}
	if len(wantFormat) != 6 {
		t.Fatal("want the four formats, a sideways JPEG and a HEIC")
	}
}
