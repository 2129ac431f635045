package demo

import (
	"bytes"
	_ "embed"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
)

// demoSampleWebP is a 40x30 lossy WebP (VP8) of a yellow sun on purple, made
// with `cwebp -q 90 -m 6 -metadata none`: the standard library and x/image
// can decode WebP but not encode it.
//
//go:embed sample.webp
var demoSampleWebP []byte

// demoSideways is a 40x30 JPEG of a landscape photographed with the phone
// held upright: its pixels lie sideways (sky on the left, grass on the
// right) and its EXIF says Orientation 6, with a GPS position. The bridge
// sends it upright (30x40, sky on top) and without its EXIF.
//
//go:embed sideways.jpg
var demoSideways []byte

// demoSampleHEIC is a 64x48 HEIC (heif-enc -q 80 of a gradient), the
// iPhone's format: converted before it is sent.
//
//go:embed sample.heic
var demoSampleHEIC []byte

// sampleTables are the demo's tables: the sample rows go into demo.photos,
// the rules write demo.photo_captions and demo.photo_embeddings.
//
// A sample of another kind (an image by reference, in a store) adds its
// table here, its rule to sampleRules, its rows to sampleRows, and its
// results to session.read; every sample that is an image must get a
// caption and an embedding (session.check).
var sampleTables = []string{
	`CREATE SCHEMA demo`,
	`CREATE TABLE demo.photos (id int PRIMARY KEY, name text NOT NULL, img bytea)`,
	`CREATE TABLE demo.photo_captions (id int PRIMARY KEY, caption text)`,
	`CREATE TABLE demo.photo_embeddings (id int PRIMARY KEY, embedding real[])`,
}

// sampleRules are the demo's rules, in SQL as a user writes them: $1 is
// the model of describe, $2 that of embed.
const sampleRules = `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column) VALUES
  ('describe', 'demo.photos', 'img', 'AI_IMAGE_COMPLETE', $1, 'Describe the image', 'demo.photo_captions', 'caption'),
  ('embed', 'demo.photos', 'img', 'AI_IMAGE_EMBED', $2, NULL, 'demo.photo_embeddings', 'embedding')`

// sampleRow is one row of demo.photos; a nil img is SQL NULL.
type sampleRow struct {
	ID    int
	Name  string
	Img   []byte
	Image bool // a valid image: the rules must give it a caption and an embedding
}

// sampleRows returns the sample rows: one image per format, then the values
// that must not reach a provider (NULL, empty, garbage) and one that reaches
// it but cannot be decoded (a PNG cut after its header), then a sideways
// photo and a HEIC, which are normalised before they are sent.
func sampleRows() ([]sampleRow, error) {
	sky, err := encodePNG(skyGradient())
	if err != nil {
		return nil, err
	}
	var square bytes.Buffer
	if err := jpeg.Encode(&square, redSquare(), &jpeg.Options{Quality: 90}); err != nil {
		return nil, fmt.Errorf("encode jpeg: %w", err)
	}
	var board bytes.Buffer
	if err := gif.Encode(&board, checkerboard(), nil); err != nil {
		return nil, fmt.Errorf("encode gif: %w", err)
	}
	return []sampleRow{
		{1, "sky.png", sky, true},
		{2, "red-square.jpg", square.Bytes(), true},
		{3, "checkerboard.gif", board.Bytes(), true},
		{4, "sun.webp", demoSampleWebP, true},
		{5, "no-image", nil, false},
		{6, "empty", []byte{}, false},
		{7, "garbage", []byte("not an image"), false},
		{8, "truncated.png", sky[:33], false}, // signature and IHDR only
		{9, "sideways.jpg", demoSideways, true},
		{10, "photo.heic", demoSampleHEIC, true},
	}, nil
}

// badSamples is how many rows of sampleRows each rule reports in
// pgimageai.errors: empty, garbage and truncated. The NULL row is not an error.
const badSamples = 3

func encodePNG(img image.Image) ([]byte, error) {
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		return nil, fmt.Errorf("encode png: %w", err)
	}
	return b.Bytes(), nil
}

// skyGradient is a 64x40 sky: deep blue at the top, pale blue at the horizon.
func skyGradient() image.Image {
	img := image.NewRGBA(image.Rect(0, 0, 64, 40))
	for y := 0; y < 40; y++ {
		c := color.RGBA{uint8(30 + 150*y/39), uint8(90 + 130*y/39), uint8(200 + 50*y/39), 255}
		for x := 0; x < 64; x++ {
			img.Set(x, y, c)
		}
	}
	return img
}

// redSquare is a 48x48 white image with a red square in the middle.
func redSquare() image.Image {
	img := image.NewRGBA(image.Rect(0, 0, 48, 48))
	for y := 0; y < 48; y++ {
		for x := 0; x < 48; x++ {
			c := color.RGBA{255, 255, 255, 255}
			if x >= 12 && x < 36 && y >= 12 && y < 36 {
				c = color.RGBA{220, 20, 20, 255}
			}
			img.Set(x, y, c)
		}
	}
	return img
}

// checkerboard is a 32x32 green and white checkerboard of 4x4 squares.
func checkerboard() image.Image {
	img := image.NewPaletted(image.Rect(0, 0, 32, 32), color.Palette{color.White, color.RGBA{0, 150, 50, 255}})
	for y := 0; y < 32; y++ {
		for x := 0; x < 32; x++ {
			img.SetColorIndex(x, y, uint8((x/4+y/4)%2))
		}
	}
	return img
}
