//go:build !race

package normalize

import (
	"bytes"
	"context"
	"image/jpeg"
	"image/png"
	"os"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/internal/wasmdec"
	"github.com/pgimageai/pgimageai/magic"
)

// peakLive runs fn and returns the most live heap it added, sampled every
// 100 µs (runtime/metrics: heap objects).
func peakLive(fn func()) int64 {
	runtime.GC()
	read := func() int64 {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		metrics.Read(s)
		return int64(s[0].Value.Uint64())
	}
	base := read()
	var peak atomic.Int64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			if v := read() - base; v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Microsecond):
			}
		}
	}()
	fn()
	close(stop)
	<-done
	return peak.Load()
}

// TestMemoryCoversDecode: what Memory charges is at least the live heap a
// normalisation adds at its peak and the WebAssembly memory its decoders
// take (mapped outside the heap), per format (the race detector's own
// allocations aside: not built with -race).
func TestMemoryCoversDecode(t *testing.T) {
	var jpg, pngb bytes.Buffer
	if err := jpeg.Encode(&jpg, photo12MP(), &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	if err := png.Encode(&pngb, photo12MP().SubImage(photo12MP().Rect.Inset(800))); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		img  []byte
	}{
		{"12 MP jpeg, turned", withEXIF(jpg.Bytes(), exifBlock(6))},
		{"png 2432x1424", pngb.Bytes()},
		{"heic", readFile(t, "testdata/gradient.heic")},
		{"avif", readFile(t, "testdata/gradient.avif")},
	}
	if b, err := os.ReadFile("testdata/12mp.heic"); err == nil { // generate.sh bench
		tests = append(tests, struct {
			name string
			img  []byte
		}{"12 MP heic", b})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := magic.Detect(tc.img)
			if err != nil {
				t.Fatal(err)
			}
			want := Memory(tc.img, f, photos)
			var r Result
			wasm := wasmdec.TotalLinear()
			peak := peakLive(func() { r, err = Image(context.Background(), tc.img, f, photos) })
			wasm = wasmdec.TotalLinear() - wasm
			if err != nil || !r.Changed {
				t.Fatalf("changed %v err %v", r.Changed, err)
			}
			t.Logf("Memory %.1f MiB, peak live heap %.1f MiB, WebAssembly memory %.1f MiB", float64(want)/(1<<20), float64(peak)/(1<<20), float64(wasm)/(1<<20))
			if peak+wasm > want {
				t.Fatalf("peak live heap %d bytes and WebAssembly memory %d over Memory's %d", peak, wasm, want)
			}
		})
	}
}
