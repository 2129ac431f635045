package local

import (
	"context"
	"image"
	"image/color"
	"strings"
	"testing"

	"github.com/pgimageai/pgimageai/provider"
)

func TestGenerateText(t *testing.T) {
	var (
		red   = color.RGBA{255, 0, 0, 255}
		blue  = color.RGBA{30, 60, 200, 255}
		white = color.RGBA{255, 255, 255, 255}
		black = color.RGBA{0, 0, 0, 255}
	)
	blueWithBand := paint(200, 100, func(u, v float64) color.RGBA {
		if v > 0.4 && v < 0.7 {
			return white
		}
		return blue
	})
	halfClear := image.NewNRGBA(image.Rect(0, 0, 40, 40))
	for y := range 40 {
		for x := range 20 {
			halfClear.SetNRGBA(x, y, color.NRGBA{255, 230, 0, 255})
		}
	}
	tests := []struct {
		name    string
		img     provider.Image
		want    string   // the whole text, when given
		has     []string // substrings, in this order
		hasNot  []string
		wantErr string
	}{
		{name: "solid red PNG", img: encodePNG(t, solid(64, 32, red)),
			want: "PNG image, 64x32 pixels, entirely red (100%), medium brightness."},
		{name: "blue with a white band", img: encodePNG(t, blueWithBand),
			want: "PNG image, 200x100 pixels, mostly blue (70%) and white (30%), medium brightness."},
		{name: "black JPEG", img: encodeJPEG(t, solid(50, 40, black), 90),
			has: []string{"JPEG image, 50x40 pixels", "black", "dark."}},
		{name: "white JPEG is bright", img: encodeJPEG(t, solid(30, 20, white), 90),
			has: []string{"JPEG image, 30x20 pixels", "white", "bright."}},
		{name: "GIF", img: encodeGIF(t, solid(33, 17, color.RGBA{0, 200, 0, 255})),
			has: []string{"GIF image, 33x17 pixels", "green"}},
		{name: "landscape", img: encodePNG(t, testImages()["landscape"]),
			want: "PNG image, 320x240 pixels, mostly blue (54%) and green (36%), bright."},
		{name: "three colours", img: encodePNG(t, paint(90, 10, func(u, v float64) color.RGBA {
			return []color.RGBA{red, white, blue}[int(u*3)] // a tie keeps palette order
		})), want: "PNG image, 90x10 pixels, mostly white (33%), red (33%) and blue (33%), medium brightness."},
		{name: "half transparent PNG", img: encodePNG(t, halfClear),
			want: "PNG image, 40x40 pixels, entirely yellow (100%), bright, 50% transparent."},
		{name: "fully transparent", img: encodePNG(t, image.NewNRGBA(image.Rect(0, 0, 8, 4))),
			want: "PNG image, 8x4 pixels, fully transparent."},
		{name: "WebP lossless fixture", img: readFixture(t, "lossless.webp"),
			want: "WebP image, 24x16 pixels, mostly green (67%) and white (33%), bright."},
		{name: "WebP lossy fixture", img: readFixture(t, "lossy.webp"),
			has: []string{"WebP image, 32x24 pixels, mostly blue (9", "dark."}},
		{name: "WebP with alpha fixture", img: readFixture(t, "alpha.webp"),
			has: []string{"WebP image, 20x20 pixels", "red", "50% transparent"}},
		{name: "unknown MIME", img: provider.Image{Data: []byte("x"), MIME: "image/bmp"}, wantErr: `"image/bmp"`},
	}
	p := newTestProvider(t, "")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := p.GenerateText(context.Background(), tt.img, "What is in this picture?")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("GenerateText = %q, %v; want an error containing %q", c.Text, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Usage != (provider.Usage{}) {
				t.Errorf("usage %+v, want zero", c.Usage)
			}
			if tt.want != "" && c.Text != tt.want {
				t.Errorf("text\n got %q\nwant %q", c.Text, tt.want)
			}
			rest := c.Text
			for _, s := range tt.has {
				i := strings.Index(rest, s)
				if i < 0 {
					t.Fatalf("text %q lacks %q (in order %q)", c.Text, s, tt.has)
				}
				rest = rest[i+len(s):]
			}
			// Deterministic, and the prompt does not matter.
			again, err := p.GenerateText(context.Background(), tt.img, "")
			if err != nil || again.Text != c.Text {
				t.Errorf("second call = %q, %v; want %q", again.Text, err, c.Text)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		r, g, b uint8
		want    colour
	}{
		{0, 0, 0, black}, {20, 25, 30, black}, {90, 10, 10, brown},
		{255, 255, 255, white}, {240, 240, 235, white},
		{128, 128, 128, grey}, {200, 200, 200, grey}, {60, 60, 60, grey},
		{255, 0, 0, red}, {200, 30, 40, red}, {255, 182, 193, pink}, {255, 0, 255, purple}, {255, 105, 180, pink}, {238, 130, 238, pink},
		{255, 140, 0, orange}, {255, 165, 0, orange}, {150, 75, 0, brown}, {139, 69, 19, brown},
		{255, 255, 0, yellow}, {250, 210, 40, yellow},
		{0, 255, 0, green}, {0, 128, 0, green}, {60, 150, 50, green},
		{0, 255, 255, cyan}, {0, 160, 170, cyan},
		{0, 0, 255, blue}, {30, 60, 200, blue}, {110, 170, 235, blue}, {20, 30, 90, blue},
		{128, 0, 128, purple}, {120, 40, 160, purple}, {138, 43, 226, purple},
	}
	for _, tt := range tests {
		if got := classify(tt.r, tt.g, tt.b); got != tt.want {
			t.Errorf("classify(%d, %d, %d) = %s, want %s", tt.r, tt.g, tt.b, got, tt.want)
		}
	}
}
