package magic

import (
	"bytes"
	"encoding/base64"
	"math/rand/v2"
	"testing"
)

// encodeBase64 must write exactly what encoding/base64 writes: every length
// around the 6-byte step and the 8-byte load, and bytes that reach each end
// of the alphabet.
func TestEncodeBase64(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	fills := map[string]func(i int) byte{
		"zeros":  func(int) byte { return 0 },
		"ones":   func(int) byte { return 0xff },
		"random": func(int) byte { return byte(r.Uint32()) },
		"counts": func(i int) byte { return byte(i) },
	}
	for name, fill := range fills {
		for n := 0; n <= 300; n++ {
			src := make([]byte, n)
			for i := range src {
				src[i] = fill(i)
			}
			checkBase64(t, name, src)
		}
	}
	// DataURL's chunks of 3,072 bytes, and a tail.
	big := make([]byte, 3*3072+5)
	for i := range big {
		big[i] = byte(r.Uint32())
	}
	if got, want := DataURL(WebP, big), "data:image/webp;base64,"+base64.StdEncoding.EncodeToString(big); got != want {
		t.Fatal("DataURL of 9,221 bytes differs from encoding/base64")
	}
}

func checkBase64(t *testing.T, name string, src []byte) {
	t.Helper()
	want := base64.StdEncoding.EncodeToString(src)
	// The destination is filled with garbage: every byte must be written.
	got := bytes.Repeat([]byte{'!'}, len(want))
	encodeBase64(got, src)
	if string(got) != want {
		t.Fatalf("%s, %d bytes: encodeBase64 = %q, encoding/base64 = %q", name, len(src), got, want)
	}
}

func FuzzEncodeBase64(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
	f.Add(bytes.Repeat([]byte{0xfb, 0xff, 0xbf}, 7))
	f.Fuzz(func(t *testing.T, src []byte) {
		checkBase64(t, "fuzz", src)
		// DataURL encodes in chunks of 3,072 bytes.
		if got, want := DataURL(GIF, src), "data:image/gif;base64,"+base64.StdEncoding.EncodeToString(src); got != want {
			t.Fatalf("DataURL(%d bytes) differs from encoding/base64", len(src))
		}
	})
}

// An 8 KB image, the size of the fast-path benchmark's rows.
func BenchmarkAppendDataURL8KiB(b *testing.B) {
	img := make([]byte, 8200)
	for i := range img {
		img[i] = byte(i * 7)
	}
	dst := make([]byte, 0, DataURLLen(PNG, img))
	b.SetBytes(int64(len(img)))
	for b.Loop() {
		dst = AppendDataURL(dst[:0], PNG, img)
	}
}
