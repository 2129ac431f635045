package local

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"runtime"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/normalize/normtest"
	"github.com/pgimageai/pgimageai/provider"
)

// allocated returns the bytes f allocates on the heap (runtime.MemStats
// TotalAlloc): an upper bound of its peak heap, garbage included.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// callBudget is the most one call of the local provider may allocate: the
// largest image each format's limits let through, decoded, described and
// embedded.
const callBudget = 64 << 20

// TestWorstInputMemory: for each format and colour model, the largest image
// the default limits let through (found by the estimate itself) costs one
// call less than 64 MiB of heap — the decoder's allocations and the shrink
// included — and the estimate is not below what was allocated. The images
// over a limit, the 50,000,000 × 1 PNG strip first, are too_large and cost
// next to nothing.
func TestWorstInputMemory(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("builds and decodes images of tens of megabytes (too slow under -short or -race)")
	}
	p := newTestProvider(t, `{}`)
	limits := p.cfg.Limits()
	largest := func(header func(w, h int) []byte, f magic.Format, aspect int) (int, int) {
		lo, hi := 1, limits.MaxSide/aspect
		for lo < hi { // the largest side s whose s·aspect × s image passes
			s := (lo + hi + 1) / 2
			if limits.check(f, header(s*aspect, s), s*aspect, s) == nil {
				lo = s
			} else {
				hi = s - 1
			}
		}
		return lo * aspect, lo
	}
	pngOf := func(depth, colour byte, interlaced, trns bool) func(w, h int) []byte {
		return func(w, h int) []byte { return craftPNG(w, h, depth, colour, interlaced, trns) }
	}
	tests := []struct {
		name   string
		format magic.Format
		build  func(w, h int) []byte // an image of w × h
		aspect int                   // width / height of the image tried
		header func(w, h int) []byte // its header alone (cheap); nil = build
	}{
		{"PNG RGBA", magic.PNG, pngOf(8, 6, false, false), 1, nil},
		{"PNG RGBA interlaced", magic.PNG, pngOf(8, 6, true, false), 1, nil},
		{"PNG RGBA64", magic.PNG, pngOf(16, 6, false, false), 1, nil},
		{"PNG grey", magic.PNG, pngOf(8, 0, false, false), 1, nil},
		{"PNG grey with tRNS", magic.PNG, pngOf(8, 0, false, true), 1, nil},
		{"PNG grey strip", magic.PNG, pngOf(8, 0, false, false), 1000, nil},
		{"PNG RGBA64 strip", magic.PNG, pngOf(16, 6, false, false), 1000, nil},
		{"GIF", magic.GIF, craftGIF, 1, func(w, h int) []byte { return gifHeader(uint16(w), uint16(h)) }},
		{"WebP lossless", magic.WebP, craftVP8L, 1, nil},
		{"JPEG baseline 4:2:0", magic.JPEG, craftBaselineJPEG, 1, baselineJPEGHeader},
		{"JPEG progressive 4:4:4", magic.JPEG, func(w, h int) []byte { return craftProgressiveJPEG(w, h, 3, 1) }, 1, nil},
		{"JPEG progressive 4:2:0", magic.JPEG, func(w, h int) []byte { return craftProgressiveJPEG(w, h, 3, 2) }, 1, nil},
		{"JPEG progressive grey", magic.JPEG, func(w, h int) []byte { return craftProgressiveJPEG(w, h, 1, 1) }, 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			header := tt.header
			if header == nil {
				header = tt.build
			}
			w, h := largest(header, tt.format, tt.aspect)
			img := provider.Image{Data: tt.build(w, h), MIME: tt.format.MIME()}
			estimate := decodedBytes(tt.format, img.Data, w, h)
			var err error
			n := allocated(func() { _, err = p.GenerateText(context.Background(), img, "") })
			if err != nil {
				t.Fatalf("%dx%d: %v", w, h, err)
			}
			t.Logf("%dx%d (%d bytes): allocated %.1f MiB, estimated %.1f MiB", w, h, len(img.Data), float64(n)/(1<<20), float64(estimate)/(1<<20))
			if n > callBudget {
				t.Errorf("%dx%d allocated %d bytes, over %d", w, h, n, callBudget)
			}
			if uint64(estimate) < n-n/8 { // the estimate may not be far below the truth
				t.Errorf("%dx%d: estimated %d bytes, allocated %d", w, h, estimate, n)
			}
			// One step larger is refused, at next to no cost.
			w2, h2 := w+tt.aspect, h+1
			big := provider.Image{Data: header(w2, h2), MIME: tt.format.MIME()}
			n = allocated(func() { _, err = p.GenerateText(context.Background(), big, "") })
			var pe *provider.Error
			if !errors.As(err, &pe) || pe.Kind != provider.TooLarge || n > 1<<20 {
				t.Errorf("%dx%d: %v after allocating %d bytes, want too_large at once", w2, h2, err, n)
			}
		})
	}

	t.Run("progressive JPEG of 2,000 scans", func(t *testing.T) {
		// 2048 x 2048 grey fits every byte limit; its scans do not.
		img := provider.Image{Data: normtest.ProgressiveJPEG(2048, 2000), MIME: "image/jpeg"}
		var err error
		start := time.Now()
		n := allocated(func() { _, err = p.GenerateText(context.Background(), img, "") })
		var pe *provider.Error
		if !errors.As(err, &pe) || pe.Kind != provider.TooLarge || n > 1<<20 || time.Since(start) > time.Second {
			t.Errorf("%v after allocating %d bytes and %s, want too_large at once", err, n, time.Since(start))
		}
		t.Logf("%d bytes: %v; allocated %d bytes", len(img.Data), err, n)
	})

	t.Run("PNG strip of 50,000,000 x 1", func(t *testing.T) {
		for _, colour := range []struct {
			depth, colour byte
		}{{8, 0}, {16, 6}} {
			img := provider.Image{Data: craftPNG(50_000_000, 1, colour.depth, colour.colour, false, false), MIME: "image/png"}
			var err error
			n := allocated(func() { _, err = p.GenerateText(context.Background(), img, "") })
			var pe *provider.Error
			if !errors.As(err, &pe) || pe.Kind != provider.TooLarge || n > 1<<20 {
				t.Errorf("depth %d colour %d: %v after allocating %d bytes, want too_large at once", colour.depth, colour.colour, err, n)
			}
			t.Logf("depth %d colour %d (%d bytes): %v; allocated %d bytes", colour.depth, colour.colour, len(img.Data), err, n)
		}
	})
}

// craftPNG returns a PNG (PNG 1.2) of w × h pixels of one colour, of the
// given bit depth and colour type, Adam7-interlaced or not, with a tRNS
// chunk or not, written row by row through zlib (never held decoded).
func craftPNG(w, h int, depth, colour byte, interlaced, trns bool) []byte {
	channels := map[byte]int{0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[colour]
	bpp := channels * int(depth) / 8
	var out bytes.Buffer
	out.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		binary.Write(&out, binary.BigEndian, uint32(len(data)))
		c := append([]byte(typ), data...)
		out.Write(c)
		binary.Write(&out, binary.BigEndian, crc32.ChecksumIEEE(c))
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], uint32(w))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(h))
	ihdr[8], ihdr[9] = depth, colour
	if interlaced {
		ihdr[12] = 1
	}
	chunk("IHDR", ihdr)
	if trns {
		chunk("tRNS", make([]byte, 2))
	}
	var idat bytes.Buffer
	z := zlib.NewWriter(&idat)
	row := bytes.Repeat([]byte{0x80}, 1+bpp*w)
	row[0] = 0 // filter None
	passes := [][4]int{{0, 0, 1, 1}}
	if interlaced {
		passes = [][4]int{{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4}, {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}}
	}
	for _, ps := range passes {
		pw, ph := (w-ps[0]+ps[2]-1)/ps[2], (h-ps[1]+ps[3]-1)/ps[3]
		if pw <= 0 || ph <= 0 {
			continue
		}
		for range ph {
			z.Write(row[:1+bpp*pw])
		}
	}
	z.Close()
	chunk("IDAT", idat.Bytes())
	chunk("IEND", nil)
	return out.Bytes()
}

// craftGIF returns a GIF of w × h pixels of one colour (image/gif's
// encoder).
func craftGIF(w, h int) []byte {
	m := image.NewPaletted(image.Rect(0, 0, w, h), color.Palette{color.Black, color.White})
	var b bytes.Buffer
	if err := gif.Encode(&b, m, nil); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// craftBaselineJPEG returns a baseline 4:2:0 JPEG of w × h pixels of one
// colour (image/jpeg's encoder).
func craftBaselineJPEG(w, h int) []byte {
	m := image.NewYCbCr(image.Rect(0, 0, w, h), image.YCbCrSubsampleRatio420)
	var b bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: 50}); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// baselineJPEGHeader returns the start of the JPEG that image/jpeg writes
// for a 4:2:0 image of w × h pixels, up to the header of its scan.
func baselineJPEGHeader(w, h int) []byte {
	return []byte{0xFF, 0xD8, 0xFF, 0xC0, 0, 17, 8, byte(h >> 8), byte(h), byte(w >> 8), byte(w), 3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1,
		0xFF, 0xDA, 0, 12, 3, 1, 0x00, 2, 0x11, 3, 0x11, 0, 63, 0}
}

// craftProgressiveJPEG returns a progressive JPEG (ITU T.81, SOF2) of
// w × h pixels and nc components, the first sampled sub × sub (the others
// 1 × 1), of one colour: a single interleaved DC scan whose every block is
// the one-bit code of "no difference". image/jpeg holds every component's
// coefficients for it, 4 bytes a sample, which is what makes progressive
// files the costly ones.
func craftProgressiveJPEG(w, h, nc, sub int) []byte {
	var b bytes.Buffer
	seg := func(marker byte, data []byte) {
		b.Write([]byte{0xFF, marker})
		binary.Write(&b, binary.BigEndian, uint16(len(data)+2))
		b.Write(data)
	}
	b.Write([]byte{0xFF, 0xD8})
	seg(0xDB, append([]byte{0}, bytes.Repeat([]byte{1}, 64)...))
	sof := []byte{8, byte(h >> 8), byte(h), byte(w >> 8), byte(w), byte(nc)}
	for i := range nc {
		hv := byte(0x11)
		if i == 0 {
			hv = byte(sub<<4 | sub)
		}
		sof = append(sof, byte(i+1), hv, 0)
	}
	seg(0xC2, sof)
	seg(0xC4, append([]byte{0x00, 1}, append(make([]byte, 15), 0)...)) // DC table 0: one 1-bit code, category 0
	sos := []byte{byte(nc)}
	for i := range nc {
		sos = append(sos, byte(i+1), 0x00)
	}
	seg(0xDA, append(sos, 0, 0, 0))
	mxx, myy := (w+8*sub-1)/(8*sub), (h+8*sub-1)/(8*sub)
	bits := mxx * myy * (sub*sub + nc - 1)
	if nc == 1 { // a single component is not interleaved: its own blocks
		bits = ((w + 7) / 8) * ((h + 7) / 8)
	}
	b.Write(make([]byte, (bits+7)/8))
	b.Write([]byte{0xFF, 0xD9})
	return b.Bytes()
}

// craftVP8L returns a lossless WebP (VP8L) of w × h pixels of one colour:
// no transform, no colour cache, one Huffman group of five one-symbol
// codes, so that every pixel takes no bits at all.
func craftVP8L(w, h int) []byte {
	var bw bitWriter
	bw.write(0x2f, 8)
	bw.write(uint32(w-1), 14)
	bw.write(uint32(h-1), 14)
	bw.write(0, 1) // alpha hint
	bw.write(0, 3) // version
	bw.write(0, 1) // no transform
	bw.write(0, 1) // no colour cache
	bw.write(0, 1) // no meta Huffman image
	for _, sym := range []uint32{0x80, 0x40, 0x20, 0xFF, 0} {
		bw.write(1, 1) // simple code
		bw.write(0, 1) // one symbol
		bw.write(1, 1) // of 8 bits
		bw.write(sym, 8)
	}
	data := bw.bytes()
	var b bytes.Buffer
	b.WriteString("RIFF")
	binary.Write(&b, binary.LittleEndian, uint32(4+8+len(data)+len(data)%2))
	b.WriteString("WEBPVP8L")
	binary.Write(&b, binary.LittleEndian, uint32(len(data)))
	b.Write(data)
	if len(data)%2 == 1 {
		b.WriteByte(0)
	}
	return b.Bytes()
}

// bitWriter writes bits least significant first, as VP8L reads them.
type bitWriter struct {
	buf   []byte
	acc   uint64
	nbits uint
}

func (w *bitWriter) write(v uint32, n uint) {
	w.acc |= uint64(v) << w.nbits
	w.nbits += n
	for w.nbits >= 8 {
		w.buf = append(w.buf, byte(w.acc))
		w.acc >>= 8
		w.nbits -= 8
	}
}

func (w *bitWriter) bytes() []byte {
	if w.nbits > 0 {
		return append(w.buf, byte(w.acc))
	}
	return w.buf
}
