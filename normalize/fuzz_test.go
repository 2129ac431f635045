package normalize

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/pgimageai/pgimageai/internal/wasmdec"
	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/normalize/normtest"
)

// FuzzImage: whatever the bytes, Image neither panics nor allocates past its
// bound — the Go heap it allocates (runtime.MemStats.TotalAlloc, garbage
// included) and the WebAssembly memory its decoders take
// (wasmdec.TotalLinear) together within MaxDecodedBytes, the header read's
// instance (headerBytes) and a few copies of the input — and what it
// changes is in a format the model accepts and needs nothing more (its
// metadata gone, upright, within the size). The hostile files of normtest
// are in its corpus (testdata/fuzz/FuzzImage, and added below).
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
	for _, b := range hostile() {
		f.Add(b)
	}
	// The decoders' modules are compiled once per process, outside any
	// input's count.
	for _, name := range []string{"gradient.heic", "gradient.avif"} {
		b := readFileF(f, filepath.Join("testdata", name))
		format, _ := magic.Detect(b)
		if _, err := Image(context.Background(), b, format, Settings{Enabled: true, Size: Size{MaxSide: 8}, Accept: []magic.Format{magic.PNG}}); err != nil {
			f.Fatal(err)
		}
	}
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
			var r Result
			var err error
			heap, wasm := allocations(func() { r, err = Image(context.Background(), b, format, s) })
			if bound := s.MaxDecodedBytes + headerBytes(b) + 4*int64(len(b)) + 1<<20; heap+wasm > bound {
				t.Fatalf("%s of %d bytes: allocated %d bytes of heap and %d of WebAssembly memory, over the bound of %d (err %v)",
					format, len(b), heap, wasm, bound, err)
			}
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

// hostile returns the decompression bombs of normtest: HEIC and AVIF files
// of under a kilobyte whose ispe says 64 × 64 and whose coded image is
// 4096 × 4096, and a progressive JPEG of 2,000 scans.
func hostile() [][]byte {
	return [][]byte{
		normtest.HEIC(64, 64, 4096, 4096),
		normtest.AVIF(64, 64, 4096, 4096),
		normtest.ProgressiveJPEG(2048, 2000),
	}
}

// allocations returns the bytes fn allocates on the Go heap
// (runtime.MemStats.TotalAlloc) and the WebAssembly memory its decodes take
// (wasmdec.TotalLinear).
func allocations(fn func()) (heap, wasm int64) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	w := wasmdec.TotalLinear()
	fn()
	runtime.ReadMemStats(&after)
	return int64(after.TotalAlloc - before.TotalAlloc), wasmdec.TotalLinear() - w
}

func readFileF(f *testing.F, name string) []byte {
	b, err := os.ReadFile(name)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// FuzzCoded: whatever the bytes, the HEIF container and bitstream reading
// of checkCoded neither panics nor passes a file whose primary image it
// found coded larger than its ispe box (it runs no decoder, so it is fuzzed
// far faster than FuzzImage).
func FuzzCoded(f *testing.F) {
	for _, b := range [][]byte{normtest.HEIC(64, 64, 64, 64), normtest.AVIF(64, 48, 64, 48), normtest.HEIC(64, 64, 4096, 4096),
		normtest.AVIF(64, 64, 4096, 4096), readFileF(f, "testdata/gradient.heic"), readFileF(f, "testdata/gradient.avif")} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, format := range []magic.Format{magic.HEIF, magic.AVIF} {
			if _, err := checkCoded(format, b); err != nil {
				continue
			}
			c, err := readContainer(b)
			if err != nil {
				t.Fatalf("checkCoded passed a file readContainer refuses: %v", err)
			}
			it := c.items[c.primary]
			if it.typ != "hvc1" && it.typ != "av01" {
				continue
			}
			w, h, _ := it.ispe()
			data, _ := c.data(it)
			var sizes [][2]uint64
			if p, ok := it.prop("hvcC"); ok && it.typ == "hvc1" {
				sizes, _ = hevcCodedSizes(p.data, data)
			} else if p, ok := it.prop("av1C"); ok {
				sizes, _ = av1CodedSizes(p.data, data)
			}
			for _, s := range sizes {
				if s[0] > uint64(w)+hevcSlack || s[1] > uint64(h)+hevcSlack {
					t.Fatalf("passed an image coded %dx%d with an ispe of %dx%d", s[0], s[1], w, h)
				}
			}
		}
	})
}
