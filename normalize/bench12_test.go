package normalize

import (
	"bytes"
	"context"
	"fmt"
	"image/jpeg"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/magic"
)

// bench12MP makes (once per machine: kept in the temporary directory) the
// 12 MP photo of BenchmarkNormalize in format name: the JPEG from photo12MP
// at quality 90 with EXIF orientation 6, the HEIC with heif-enc (libheif's
// x265, quality 50, preset fast) and the AVIF with avifenc (speed 8) from
// that JPEG. It returns the file's path.
func bench12MP(b *testing.B, name string) string {
	b.Helper()
	dir := filepath.Join(os.TempDir(), "pgimageai-bench-12mp-v1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	jpg := filepath.Join(dir, "photo.jpg")
	if _, err := os.Stat(jpg); err != nil {
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, photo12MP(), &jpeg.Options{Quality: 90}); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(jpg+".tmp", withEXIF(buf.Bytes(), exifBlock(6)), 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.Rename(jpg+".tmp", jpg); err != nil {
			b.Fatal(err)
		}
	}
	if name == "jpeg" {
		return jpg
	}
	out := filepath.Join(dir, "photo."+name)
	if _, err := os.Stat(out); err == nil {
		return out
	}
	var cmd *exec.Cmd
	switch name {
	case "heic":
		cmd = exec.Command("heif-enc", "-q", "50", "-p", "preset=fast", "-o", out+".tmp."+name, jpg)
	case "avif":
		cmd = exec.Command("avifenc", "-s", "8", "-j", "2", jpg, out+".tmp."+name)
	}
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Skipf("%s (apt-get install libheif-examples libavif-bin): %v: %s", cmd.Path, err, msg)
	}
	if err := os.Rename(out+".tmp."+name, out); err != nil {
		b.Fatal(err)
	}
	return out
}

// cpu is the CPU time (user and system) of this process so far, every
// thread's: the Go decoders' and libvips's.
func cpu(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// resetPeakRSS starts the process's peak RSS (VmHWM) again from its RSS now
// (Linux: /proc/self/clear_refs); peakRSS reads it. 0 where unreadable.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// vipsthumbnailCPU runs vipsthumbnail (one thread) n times on path to the
// same 1024-pixel JPEG at quality 90, stripped, and returns its CPU time
// per image (the whole process, start-up included, as a user runs it) and
// its peak RSS; ok is false without vipsthumbnail.
func vipsthumbnailCPU(b *testing.B, path string, n int) (per time.Duration, rss int64, ok bool) {
	for _, p := range []string{"vipsthumbnail", "/usr/bin/time"} {
		if _, err := exec.LookPath(p); err != nil {
			b.Logf("no %s (apt-get install libvips-tools time): no comparison", p)
			return 0, 0, false
		}
	}
	dir := b.TempDir()
	out, rssFile := filepath.Join(dir, "t.jpg"), filepath.Join(dir, "rss")
	var total time.Duration
	for range n {
		// Through /usr/bin/time, whose %M is vipsthumbnail's own peak RSS:
		// a child started by this process inherits this process's (Linux
		// keeps the larger across fork and exec). The CPU time of the
		// process waited for includes its waited-for child's.
		cmd := exec.Command("/usr/bin/time", "-f", "%M", "-o", rssFile, "vipsthumbnail", path, "-s", "1024", "-o", out+"[Q=90,strip]")
		cmd.Env = append(os.Environ(), "VIPS_CONCURRENCY=1", "VIPS_WARNING=0")
		if msg, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("vipsthumbnail: %v: %s", err, msg)
		}
		total += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		if m, err := os.ReadFile(rssFile); err == nil {
			kb, _ := strconv.ParseInt(strings.TrimSpace(string(m)), 10, 64)
			rss = max(rss, kb<<10)
		}
	}
	return total / time.Duration(n), rss, true
}

// BenchmarkNormalize: one 12 MP photo (4032 × 3024) per format normalised
// for OpenAI's detail high (to 768 × 1024 turned, JPEG at quality 90), with
// this build's backend (Backend). Beside it, in the same run on the same
// file, vipsthumbnail (Debian's libvips, one thread) to the same size and
// quality: cpu-s/image for each, libvips/bridge (the bridge's speed as a
// fraction of libvips's: 1 is as fast), and the peak RSS of each (the
// bridge's: this process's high-water mark during the loop, the fixture
// in memory included).
func BenchmarkNormalize(b *testing.B) {
	b.Logf("backend: %s", Backend())
	for _, name := range []string{"jpeg", "heic", "avif"} {
		b.Run(name, func(b *testing.B) {
			path := bench12MP(b, name)
			img, err := os.ReadFile(path)
			if err != nil {
				b.Fatal(err)
			}
			f, err := magic.Detect(img)
			if err != nil {
				b.Fatal(err)
			}
			s := photos
			if mem := Memory(img, f, s); mem > s.maxDecodedBytes() {
				b.Logf("%s: Memory %.0f MiB over the default bound; raised for the pure-Go decoders", name, float64(mem)/(1<<20))
				s.MaxDecodedBytes = 1 << 30
			}
			var r Result
			if r, err = Image(context.Background(), img, f, s); err != nil { // warm: libvips' start, WebAssembly compiled
				b.Fatal(err)
			}
			runtime.GC()
			debug.FreeOSMemory()
			resetPeakRSS()
			base := peakRSS()
			start := cpu(b)
			b.ReportAllocs()
			for b.Loop() {
				if r, err = Image(context.Background(), img, f, s); err != nil {
					b.Fatal(err)
				}
			}
			bridge := (cpu(b) - start) / time.Duration(b.N)
			rss := peakRSS()
			b.ReportMetric(bridge.Seconds(), "cpu-s/image")
			b.ReportMetric(float64(rss)/(1<<20), "peak-RSS-MiB")
			b.ReportMetric(float64(rss-base)/(1<<20), "peak-RSS-over-start-MiB")
			charged := Memory(img, f, s)
			b.ReportMetric(float64(charged)/(1<<20), "charged-MiB")
			if rss > 0 && rss-base > charged {
				b.Errorf("the process grew %.0f MiB during the loop, over the %.0f MiB Memory charges an image", float64(rss-base)/(1<<20), float64(charged)/(1<<20))
			}
			b.ReportMetric(float64(len(img)), "bytes-before")
			b.ReportMetric(float64(len(r.Data)), "bytes-after")
			if v, vrss, ok := vipsthumbnailCPU(b, path, max(3, b.N)); ok {
				b.ReportMetric(v.Seconds(), "vipsthumbnail-cpu-s/image")
				b.ReportMetric(float64(vrss)/(1<<20), "vipsthumbnail-peak-RSS-MiB")
				b.ReportMetric(v.Seconds()/bridge.Seconds(), "libvips/bridge")
				fmt.Fprintf(os.Stderr, "normalize %s 4032x3024 → %dx%d: bridge %.3f s CPU/image, peak RSS %.0f MiB (%.0f over its start, %.0f charged); vipsthumbnail %.3f s, %.0f MiB; ratio %.2f\n",
					name, r.Width, r.Height, bridge.Seconds(), float64(rss)/(1<<20), float64(rss-base)/(1<<20), float64(charged)/(1<<20), v.Seconds(), float64(vrss)/(1<<20), v.Seconds()/bridge.Seconds())
			}
		})
	}
}
