package integration_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/bridge"
	"github.com/pgimageai/pgimageai/console"
)

// consolePageRows is what one page of a rule's results shows.
const consolePageRows = 50

var thumbSrc = regexp.MustCompile(`<img src="(/thumb\?[^"]+)"`)

// BenchmarkConsoleThumbnails measures a rule's page of 50 results served
// from cold, as a browser loads it: the page, then its 50 thumbnails six at
// a time (a browser's connections per host), each made from a JPEG in the
// source table (640x480, then 1280x960) and cached by a console that has
// made none yet. It reports ms/page; run it with scripts/bench.
func BenchmarkConsoleThumbnails(b *testing.B) {
	for _, size := range [][2]int{{640, 480}, {1280, 960}} {
		b.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(b *testing.B) { benchConsolePage(b, size[0], size[1]) })
	}
}

func benchConsolePage(b *testing.B, w, h int) {
	s := newSource(b)
	s.exec(b, `INSERT INTO pgimageai.models (name, provider, model) VALUES ('pixels', 'local', 'any')`)
	s.exec(b, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('describe', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'pixels', 'Describe', 'public.captions', 'caption')`)
	s.exec(b, `CREATE TABLE public.captions (id int PRIMARY KEY, caption text)`)
	for id := 1; id <= consolePageRows; id++ {
		s.exec(b, "INSERT INTO public.photos (id, img) VALUES ($1, $2)", id, photoJPEGSized(b, id, w, h))
		s.exec(b, "INSERT INTO public.captions (id, caption) VALUES ($1, $2)", id, fmt.Sprintf("photo %d: a sun over green hills", id))
	}
	ctx := context.Background()
	var total, cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		db, err := console.OpenDB(ctx, console.DBConfig{SourceDSN: s.db.DSN(), Group: bridge.DefaultGroup, Slot: s.slot})
		if err != nil {
			b.Fatal(err)
		}
		srv, err := console.New(console.Config{Token: consoleToken}, db)
		if err != nil {
			b.Fatal(err)
		}
		ts := httptest.NewServer(srv)
		b.StartTimer()
		t0, c0 := time.Now(), selfCPU(b)
		loadPage(b, ts.URL+"/rules/describe")
		total += time.Since(t0)
		cpu += selfCPU(b) - c0
		b.StopTimer()
		ts.Close()
		db.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/page")
	// The CPU the console took (this process: the console, and the client,
	// which costs little): what a page costs whatever else the machine is
	// doing; over 2 cores, the page's wall time on an idle machine is about
	// half of it.
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/page")
}

// selfCPU is this process's user and system time so far.
func selfCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadPage GETs a rule's page and its thumbnails as a browser does.
func loadPage(tb testing.TB, u string) {
	tb.Helper()
	status, body := benchGet(tb, u)
	if status != http.StatusOK {
		tb.Fatalf("%s: %d", u, status)
	}
	srcs := thumbSrc.FindAllStringSubmatch(body, -1)
	if len(srcs) != consolePageRows {
		tb.Fatalf("%d thumbnails on the page, want %d", len(srcs), consolePageRows)
	}
	base := u[:len(u)-len("/rules/describe")]
	work := make(chan string)
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			for src := range work {
				if status, _ := benchGet(tb, base+src); status != http.StatusOK {
					tb.Errorf("%s: %d", src, status)
				}
			}
		})
	}
	for _, m := range srcs {
		work <- html.UnescapeString(m[1])
	}
	close(work)
	wg.Wait()
}

func benchGet(tb testing.TB, u string) (int, string) {
	tb.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+consoleToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var buf [32 << 10]byte
	var out []byte
	for {
		n, err := resp.Body.Read(buf[:])
		out = append(out, buf[:n]...)
		if err != nil {
			break
		}
	}
	return resp.StatusCode, string(out)
}

// pollConsole reads the console at base as an open tab would, only more
// often, until the returned stop: the overview every second, the page of
// rule caption every 5 seconds. Refused connections (no bridge running
// between the benchmark's phases) are not counted.
func pollConsole(b *testing.B, base string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var pages, failed int
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			paths := []string{"/"}
			if i%5 == 0 {
				paths = append(paths, "/rules/caption")
			}
			for _, p := range paths {
				req, _ := http.NewRequestWithContext(ctx, "GET", base+p, nil)
				req.Header.Set("Authorization", "Bearer "+consoleToken)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					continue
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					pages++
				} else {
					failed++
				}
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
		b.Logf("the console served %d pages while the bridge ran (%d not 200)", pages, failed)
	}
}
