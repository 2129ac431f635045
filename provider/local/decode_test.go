package local

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image/color"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/provider"
)

// pngHeader returns a PNG signature and a valid IHDR chunk declaring w × h
// RGBA pixels, and nothing more.
func pngHeader(w, h uint32) []byte {
	var ihdr [13]byte
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 6 // 8-bit RGBA
	chunk := append([]byte("IHDR"), ihdr[:]...)
	b := []byte("\x89PNG\r\n\x1a\n")
	b = binary.BigEndian.AppendUint32(b, uint32(len(ihdr)))
	b = append(b, chunk...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(chunk))
}

// gifHeader returns a GIF89a header declaring a w × h logical screen.
func gifHeader(w, h uint16) []byte {
	b := []byte("GIF89a")
	b = binary.LittleEndian.AppendUint16(b, w)
	b = binary.LittleEndian.AppendUint16(b, h)
	return append(b, 0, 0, 0)
}

func TestLoadErrors(t *testing.T) {
	redPNG := encodePNG(t, solid(64, 32, color.RGBA{255, 0, 0, 255})).Data
	jpg := encodeJPEG(t, solid(64, 32, color.RGBA{255, 0, 0, 255}), 80).Data
	webp := readFixture(t, "lossy.webp").Data
	tests := []struct {
		name     string
		options  string
		img      provider.Image
		tooLarge bool // refused by a limit (too_large), not by the decoder
		wantErr  []string
	}{
		{name: "PNG signature and garbage", img: provider.Image{Data: append([]byte("\x89PNG\r\n\x1a\n"), "garbage!garbage!"...), MIME: "image/png"},
			wantErr: []string{"decode PNG: unexpected EOF"}},
		{name: "PNG cut short", img: provider.Image{Data: redPNG[:len(redPNG)-30], MIME: "image/png"},
			wantErr: []string{"decode PNG: png: invalid format: not enough pixel data"}},
		{name: "PNG header without pixels", img: provider.Image{Data: pngHeader(10, 10), MIME: "image/png"},
			wantErr: []string{"decode PNG: "}},
		{name: "JPEG magic and garbage", img: provider.Image{Data: []byte("\xff\xd8\xff\xe0 this is not a JPEG"), MIME: "image/jpeg"},
			wantErr: []string{"decode JPEG: "}},
		{name: "JPEG cut short", img: provider.Image{Data: jpg[:len(jpg)/2], MIME: "image/jpeg"},
			wantErr: []string{"decode JPEG: "}},
		{name: "GIF magic and garbage", img: provider.Image{Data: []byte("GIF89a\x01"), MIME: "image/gif"},
			wantErr: []string{"decode GIF: ", "gif: "}},
		{name: "GIF screen without frames", img: provider.Image{Data: gifHeader(4, 4), MIME: "image/gif"},
			wantErr: []string{"decode GIF: ", "gif: "}},
		{name: "WebP magic and garbage", img: provider.Image{Data: []byte("RIFF\x10\x00\x00\x00WEBPVP8 garbage!"), MIME: "image/webp"},
			wantErr: []string{"decode WebP: "}},
		{name: "WebP cut short", img: provider.Image{Data: webp[:40], MIME: "image/webp"},
			wantErr: []string{"decode WebP: "}},
		{name: "MIME and bytes disagree", img: provider.Image{Data: jpg, MIME: "image/png"},
			wantErr: []string{"decode PNG: ", "png: invalid format: not a PNG file"}},
		{name: "PNG of 100000x100000 refused", img: provider.Image{Data: pngHeader(100000, 100000), MIME: "image/png"}, tooLarge: true,
			wantErr: []string{"PNG image of 100000x100000 pixels: its side of 100000 pixels is over the limit of 16384 (option max_side); not decoded"}},
		{name: "GIF of 65535x65535 refused", img: provider.Image{Data: gifHeader(65535, 65535), MIME: "image/gif"}, tooLarge: true,
			wantErr: []string{"GIF image of 65535x65535 pixels", "over the limit"}},
		{name: "max_pixels option", options: `{"max_pixels":2000}`, img: provider.Image{Data: redPNG, MIME: "image/png"}, tooLarge: true,
			wantErr: []string{"PNG image of 64x32 pixels (0.0 megapixels) is over the limit of 0.0 megapixels (option max_pixels); not decoded"}},
		{name: "PNG strip of 50,000,000x1 refused", img: provider.Image{Data: pngHeader(50_000_000, 1), MIME: "image/png"}, tooLarge: true,
			wantErr: []string{"PNG image of 50000000x1 pixels: its side of 50000000 pixels is over the limit of 16384 (option max_side)"}},
		{name: "max_side option", options: `{"max_side":63}`, img: provider.Image{Data: redPNG, MIME: "image/png"}, tooLarge: true,
			wantErr: []string{"its side of 64 pixels is over the limit of 63 (option max_side)"}},
		{name: "max_aspect option", options: `{"max_aspect":1.5}`, img: provider.Image{Data: redPNG, MIME: "image/png"}, tooLarge: true,
			wantErr: []string{"its aspect ratio of 2:1 is over the limit of 1.5:1 (option max_aspect)"}},
		{name: "default max_aspect", img: provider.Image{Data: pngHeader(16000, 15), MIME: "image/png"}, tooLarge: true,
			wantErr: []string{"its aspect ratio of 1067:1 is over the limit of 1000:1"}},
		{name: "max_decoded_bytes option", options: `{"max_decoded_bytes":8000}`, img: provider.Image{Data: redPNG, MIME: "image/png"}, tooLarge: true,
			wantErr: []string{"PNG image of 64x32 pixels would take 0.4 MiB to decode, over the limit of 0.0 MiB (option max_decoded_bytes); not decoded"}},
		{name: "default max_decoded_bytes", img: provider.Image{Data: pngHeader(4000, 4000), MIME: "image/png"}, tooLarge: true,
			wantErr: []string{"would take 61.4 MiB to decode, over the limit of 48.0 MiB"}},
		{name: "zero width", img: provider.Image{Data: pngHeader(0, 5), MIME: "image/png"},
			wantErr: []string{"decode PNG: "}},
		{name: "unknown MIME", img: provider.Image{Data: redPNG, MIME: "image/tiff"},
			wantErr: []string{`image type "image/tiff" is not one of`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTestProvider(t, tt.options)
			for _, call := range []func() error{
				func() error { _, err := p.GenerateText(context.Background(), tt.img, "describe"); return err },
				func() error { _, err := p.EmbedImage(context.Background(), tt.img); return err },
			} {
				err := call()
				var pe *provider.Error
				want := provider.Permanent
				if tt.tooLarge {
					want = provider.TooLarge
				}
				if !errors.As(err, &pe) || pe.Kind != want {
					t.Fatalf("err = %#v, want a %s *provider.Error", err, want)
				}
				if provider.Retryable(err) {
					t.Fatalf("%v is retryable", err)
				}
				for _, s := range tt.wantErr {
					if !strings.Contains(pe.Message, s) {
						t.Fatalf("message %q lacks %q", pe.Message, s)
					}
				}
			}
		})
	}
}

func TestLoadStops(t *testing.T) {
	img := encodePNG(t, testImages()["clouds-1"])
	tests := []struct {
		name    string
		options string
		ctx     func() (context.Context, context.CancelFunc)
		wantMsg string
	}{
		{name: "caller cancelled", ctx: func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, wantMsg: "image analysis stopped: context canceled"},
		{name: "timeout", options: `{"timeout":"1ns"}`, ctx: func() (context.Context, context.CancelFunc) {
			return context.WithCancel(context.Background())
		}, wantMsg: "image analysis took longer than the timeout of 1ns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTestProvider(t, tt.options)
			ctx, cancel := tt.ctx()
			defer cancel()
			_, err := p.EmbedImage(ctx, img)
			var pe *provider.Error
			if !errors.As(err, &pe) || pe.Kind != provider.Transient || pe.Message != tt.wantMsg {
				t.Fatalf("err = %v, want a transient *provider.Error %q", err, tt.wantMsg)
			}
		})
	}
}

func TestLoadHonoursConcurrency(t *testing.T) {
	p := newTestProvider(t, `{"max_concurrency":1}`)
	release, err := p.limiter.Acquire(context.Background()) // the only slot, held
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = p.GenerateText(ctx, encodePNG(t, solid(4, 4, color.RGBA{A: 255})), "")
	if !provider.Retryable(err) || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("err = %v, want a transient error after waiting for the slot", err)
	}
}

func TestFit(t *testing.T) {
	tests := []struct{ w, h, wantW, wantH int }{
		{64, 32, 64, 32}, {256, 256, 256, 256}, {1024, 768, 256, 192},
		{320, 240, 256, 192}, {438, 329, 256, 192}, {10000, 10, 256, 1}, {3, 900, 1, 256},
	}
	for _, tt := range tests {
		if w, h := fit(tt.w, tt.h, workSize); w != tt.wantW || h != tt.wantH {
			t.Errorf("fit(%d, %d) = %d, %d; want %d, %d", tt.w, tt.h, w, h, tt.wantW, tt.wantH)
		}
	}
}

func TestFixturesAreByteExact(t *testing.T) {
	for name, head := range map[string]string{
		"lossless.webp": "RIFF&\x00\x00\x00WEBPVP8L",
		"lossy.webp":    "RIFF^\x00\x00\x00WEBPVP8 ",
		"alpha.webp":    "RIFF\x8e\x00\x00\x00WEBPVP8X",
	} {
		if data := readFixture(t, name).Data; !bytes.HasPrefix(data, []byte(head)) {
			t.Errorf("%s starts %q, want %q", name, data[:min(16, len(data))], head)
		}
	}
}

func TestGuard(t *testing.T) {
	_, err := guard(func(io.Reader) (int, error) { panic("index out of range") }, nil)
	if err == nil || err.Error() != "decoder panicked: index out of range" {
		t.Fatalf("err = %v", err)
	}
}
