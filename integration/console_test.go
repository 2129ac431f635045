package integration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/jpeg"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/pgimageai/pgimageai/bridge"
	"github.com/pgimageai/pgimageai/console"
	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/provider/local"
)

// The web console in a real browser (Debian's chromium, headless, driven by
// chromedp) against a real bridge and PostgreSQL: what a user sees and what
// an attacker cannot do.

const consoleToken = "integration-console-token-5f1c2a"

// consoleEnv is a bridge streaming three rules — a caption by the local
// provider, an embedding by it into a pgvector column, and a caption by a
// fake OpenAI model that answers HTML — and a console on a loopback port.
type consoleEnv struct {
	s    *source
	ai   *fakeAI
	url  string
	fail atomic.Bool // the fake model fails (HTTP 400) for the images of failing
}

// failing is the image the fake model refuses while fail is set.
var failing []byte

const hostileCaption = `<img src=x onerror=alert(1)></script><script>alert(2)</script>`

func newConsoleEnv(t *testing.T) *consoleEnv {
	t.Helper()
	e := &consoleEnv{s: newSource(t), ai: newFakeAI(t)}
	s := e.s
	failing = photoJPEG(t, 8)
	e.fail.Store(true)
	e.ai.Set(0, func(r aiRequest) (int, string) {
		if e.fail.Load() && r.DataURL == magic.DataURL(magic.JPEG, failing) {
			return http.StatusBadRequest, "the model refuses this image"
		}
		return http.StatusOK, hostileCaption
	})
	s.exec(t, "CREATE EXTENSION IF NOT EXISTS vector")
	s.exec(t, "CREATE TABLE public.vecs (id int PRIMARY KEY, v vector(128))")
	s.exec(t, `INSERT INTO pgimageai.models (name, provider, model) VALUES ('pixels', 'local', 'any')`)
	s.exec(t, `INSERT INTO pgimageai.models (name, provider, base_url, model, options) VALUES ('vision', 'openai', $1, 'gpt-test', '{"max_retries": 0}')`, e.ai.BaseURL())
	s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column) VALUES
  ('describe', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'pixels', 'Describe', 'public.captions', 'caption'),
  ('vectors', 'public.photos', 'img', 'AI_IMAGE_EMBED', 'pixels', NULL, 'public.vecs', 'v'),
  ('html', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'vision', 'Describe', 'public.answers', 'answer')`)
	cfg := s.config(t)
	cfg.Registry.Register("local", local.Factory)
	s.start(t, cfg)
	for id := 1; id <= 6; id++ {
		s.exec(t, "INSERT INTO public.photos (id, img) VALUES ($1, $2)", id, photoJPEG(t, id))
	}
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (8, $1)", failing)
	s.sync(t, 60*time.Second)

	ctx, cancel := context.WithCancel(context.Background())
	db, err := console.OpenDB(ctx, console.DBConfig{SourceDSN: s.db.DSN(), Group: bridge.DefaultGroup, Slot: s.slot, AllowRetry: true})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := console.New(console.Config{Token: consoleToken, AllowRetry: true, Refresh: time.Second, SampleEvery: 500 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))}, db)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("console: %v", err)
		}
		db.Close()
	})
	e.url = "http://" + ln.Addr().String()
	return e
}

// photoJPEG is a 640x480 picture, distinct per seed: a gradient sky, a sun
// and hills.
func photoJPEG(t testing.TB, seed int) []byte {
	t.Helper()
	return photoJPEGSized(t, seed, 640, 480)
}

// photoJPEGSized is photoJPEG of w × h pixels.
func photoJPEGSized(t testing.TB, seed, w, h int) []byte {
	t.Helper()
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	hue := float64(seed) * 0.7
	sky := color.RGBA{uint8(90 + 60*math.Sin(hue)), uint8(140 + 50*math.Sin(hue+2)), uint8(200 + 40*math.Sin(hue+4)), 255}
	sunX, sunY, sunR := (120+seed*70%400)*w/640, (90+seed*23%120)*h/480, (40+seed*7%30)*w/640
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			f := float64(y) / float64(h)
			c := color.RGBA{uint8(float64(sky.R) * (1 - f/2)), uint8(float64(sky.G) * (1 - f/3)), sky.B, 255}
			if dx, dy := x-sunX, y-sunY; dx*dx+dy*dy < sunR*sunR {
				c = color.RGBA{255, uint8(200 + seed*10%50), 60, 255}
			}
			hill := float64(h)*0.62 + float64(h)/12*math.Sin(float64(x)*640/float64(w)/(60+float64(seed*9%40))+hue)
			if float64(y) > hill {
				g := uint8(90 + seed*25%120)
				c = color.RGBA{uint8(40 + seed*13%60), g, uint8(50 + seed*5%40), 255}
			}
			m.Set(x, y, c)
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, m, &jpeg.Options{Quality: 85}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// chromium returns the browser to drive: under CI=true a missing one fails
// the test, it never skips.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if ci := os.Getenv("CI"); ci == "true" || ci == "1" {
		t.Fatal("chromium is not installed (apt-get install chromium); the console's browser tests need it")
	}
	t.Skip("chromium is not installed (apt-get install chromium)") // ok-to-skip: outside CI only
	return ""
}

// browser is a headless chromium tab; dialogs counts the JavaScript dialogs
// (alert, confirm) any page opened.
type browser struct {
	ctx     context.Context
	dialogs atomic.Int64
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium(t)), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 1000), chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{ctx: ctx}
	if err := chromedp.Do(ctx); err != nil { // starts the browser, on a context without a timeout
		t.Fatal(err)
	}
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			b.dialogs.Add(1)
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	return b
}

func (b *browser) run(t *testing.T, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// eval evaluates js in the page.
func eval[T any](t *testing.T, b *browser, js string, opts ...chromedp.EvaluateOption) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, opts...))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return v
}

// eval evaluates js in the page into out, by way of JSON.
func (b *browser) eval(t *testing.T, js string, out any) {
	t.Helper()
	if err := json.Unmarshal([]byte(eval[string](t, b, "JSON.stringify("+js+")")), out); err != nil {
		t.Fatalf("%s: %v", js, err)
	}
}

// waitJS polls js in the page until it is true.
func (b *browser) waitJS(t *testing.T, timeout time.Duration, what, js string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if eval[bool](t, b, js) {
			return
		}
		if time.Now().After(deadline) {
			text := eval[string](t, b, `document.body.innerText`)
			t.Fatalf("timed out after %s waiting for %s; the page says:\n%s", timeout, what, text)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

const imagesLoaded = `Array.from(document.images).length > 0 && Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)`

// screenshot keeps a full-page PNG of the current page as a test artefact:
// in $PGIMAGEAI_ARTIFACTS/console when set (docs/ takes its pictures from
// there), else in the test's temporary directory.
func (b *browser) screenshot(t *testing.T, name string) {
	t.Helper()
	dir := t.TempDir()
	if a := os.Getenv("PGIMAGEAI_ARTIFACTS"); a != "" {
		dir = filepath.Join(a, "console")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if len(png) < 8 || string(png[1:4]) != "PNG" {
		t.Fatalf("screenshot %s is not a PNG", name)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// login logs the browser in through the login page.
func (b *browser) login(t *testing.T, base string) {
	t.Helper()
	b.run(t, chromedp.Navigate(base+"/login"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), consoleToken), chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.ID("rules")))
}

func TestConsoleBrowser(t *testing.T) {
	b := newBrowser(t)
	e := newConsoleEnv(t)
	s := e.s

	t.Run("without the token every page is 401", func(t *testing.T) {
		paths := []string{"/", "/rules/describe", "/rules/vectors?similar=" + url.QueryEscape(`{"id": 1}`), "/errors",
			"/thumb?rule=describe&key=" + url.QueryEscape(`{"id": 1}`)}
		for _, p := range paths {
			status, body := httpGet(t, e.url+p, "")
			if status != http.StatusUnauthorized || strings.Contains(body, "caption") && strings.Contains(body, "PNG") {
				t.Errorf("GET %s without the token: %d", p, status)
			}
			if status, _ := httpGet(t, e.url+p, consoleToken); status != http.StatusOK {
				t.Errorf("GET %s with the Bearer token: %d, want 200", p, status)
			}
		}
		// In the browser: the login page, and nothing of the data.
		var text string
		b.run(t, chromedp.Navigate(e.url+"/"), chromedp.WaitVisible(chromedp.ID("token")))
		b.eval(t, `document.body.innerText`, &text)
		if strings.Contains(text, "describe") || !strings.Contains(text, "needs the console token") {
			t.Errorf("the page without a login shows:\n%s", text)
		}
	})

	b.login(t, e.url)

	t.Run("the overview shows each rule and updates when a row arrives", func(t *testing.T) {
		b.run(t, chromedp.Navigate(e.url+"/"), chromedp.WaitVisible(chromedp.ID("rules")))
		var rules []string
		b.eval(t, `Array.from(document.querySelectorAll('#rules tbody tr')).map(r => r.dataset.rule)`, &rules)
		if strings.Join(rules, ",") != "describe,html,vectors" {
			t.Fatalf("the overview lists rules %v, want describe, html and vectors", rules)
		}
		var before string
		b.eval(t, `document.getElementById('main').innerText`, &before)
		if strings.Contains(before, "unknown_format") {
			t.Fatal("unknown_format before the row arrived")
		}
		s.exec(t, "INSERT INTO public.photos (id, img) VALUES (7, 'hello, not an image'::bytea)")
		// No reload: the page polls itself.
		b.waitJS(t, 30*time.Second, "the overview to show the new row's errors",
			`document.getElementById('main').innerText.includes('unknown_format')`)
		// More rows: the calls chart of the minute grows, without a reload.
		for id := 20; id < 32; id++ {
			s.exec(t, "INSERT INTO public.photos (id, img) VALUES ($1, $2)", id, photoJPEG(t, id))
		}
		b.waitJS(t, 30*time.Second, "the calls chart to show the new rows",
			`Array.from(document.querySelectorAll('#rules tr[data-rule="describe"] svg rect')).some(r => parseFloat(r.getAttribute('height')) > 20)`)
		b.screenshot(t, "console-overview")
	})

	t.Run("a rule's page shows the thumbnail beside the caption", func(t *testing.T) {
		s.exec(t, "INSERT INTO public.photos (id, img) VALUES (99, $1)", photoJPEG(t, 9))
		s.sync(t, 60*time.Second)
		b.run(t, chromedp.Navigate(e.url+"/rules/describe"), chromedp.WaitVisible(chromedp.ID("results")))
		b.waitJS(t, 20*time.Second, "the thumbnails to load", imagesLoaded)
		var first struct {
			Key, Caption string
			W, H         int
			Src          string
		}
		b.eval(t, `(() => { const f = document.querySelector('#results figure'); const i = f.querySelector('img');
  return {Key: f.querySelector('.key').textContent, Caption: f.querySelector('.caption').textContent, W: i.naturalWidth, H: i.naturalHeight, Src: i.src}; })()`, &first)
		if first.Key != `{"id": 99}` || !strings.HasPrefix(first.Caption, "JPEG image, 640x480 pixels") {
			t.Errorf("the newest result is %s %q, want row 99 with the local provider's caption", first.Key, first.Caption)
		}
		if first.W != console.ThumbSide || first.H != console.ThumbSide*3/4 || !strings.HasPrefix(first.Src, e.url+"/thumb?") {
			t.Errorf("its thumbnail is %dx%d from %s, want %dx%d from the console", first.W, first.H, first.Src, console.ThumbSide, console.ThumbSide*3/4)
		}
		b.screenshot(t, "console-rule-complete")
	})

	t.Run("an EMBED rule shows dimension and norm, and similar images", func(t *testing.T) {
		b.run(t, chromedp.Navigate(e.url+"/rules/vectors"), chromedp.WaitVisible(chromedp.ID("results")))
		var vec string
		b.eval(t, `document.querySelector('#results .vec').textContent`, &vec)
		if !strings.HasPrefix(vec, "dimension 128, norm ") {
			t.Errorf("the EMBED result says %q, want its dimension and norm", vec)
		}
		b.run(t, chromedp.Click(chromedp.CSS(`#results figure a.small`)), chromedp.WaitVisible(chromedp.ID("similar")))
		b.waitJS(t, 20*time.Second, "the similar images to load", imagesLoaded)
		var n int
		b.eval(t, `document.querySelectorAll('#similar figure').length`, &n)
		if n < 4 {
			t.Errorf("%d figures under similar images, want the row asked about and its neighbours", n)
		}
		b.screenshot(t, "console-rule-embed-similar")
	})

	t.Run("a hostile caption is text and runs nothing", func(t *testing.T) {
		b.run(t, chromedp.Navigate(e.url+"/rules/html"), chromedp.WaitVisible(chromedp.ID("results")))
		var dom struct {
			Caption     string
			CaptionImgs int
			Scripts     int
			BadImgs     int
		}
		b.eval(t, `({Caption: document.querySelector('#results .caption').textContent,
  CaptionImgs: document.querySelectorAll('figcaption img, .caption img, .caption *').length,
  Scripts: document.scripts.length,
  BadImgs: Array.from(document.images).filter(i => i.getAttribute('src') === 'x').length})`, &dom)
		if dom.Caption != hostileCaption {
			t.Errorf("the caption reads %q, want the model's answer as text", dom.Caption)
		}
		if dom.CaptionImgs != 0 || dom.BadImgs != 0 || dom.Scripts != 1 {
			t.Errorf("the caption made elements: %+v", dom)
		}
		time.Sleep(500 * time.Millisecond)
		if n := b.dialogs.Load(); n != 0 {
			t.Errorf("%d JavaScript dialogs opened", n)
		}
	})

	t.Run("a POST without the CSRF token is refused", func(t *testing.T) {
		b.run(t, chromedp.Navigate(e.url+"/errors"), chromedp.WaitVisible(chromedp.ID("errors")))
		status := eval[int](t, b, `fetch('/retry', {method: 'POST', body: new URLSearchParams({rule: 'html', reason: 'provider_error', confirm: 'yes'})}).then(r => r.status)`,
			chromedp.EvalAwaitPromise)
		if status != http.StatusForbidden {
			t.Errorf("POST /retry without CSRF from the logged-in page: %d, want 403", status)
		}
		if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.retry_requests"); n != 0 {
			t.Errorf("%d retry requests after a refused POST", n)
		}
	})

	t.Run("the errors page: thumbnails, formats, and a retry that asks first", func(t *testing.T) {
		b.run(t, chromedp.Navigate(e.url+"/errors"), chromedp.WaitVisible(chromedp.ID("errors")))
		b.waitJS(t, 20*time.Second, "the error thumbnails to load", imagesLoaded)
		var rows []string
		b.eval(t, `Array.from(document.querySelectorAll('#errors tbody tr')).map(r => r.innerText)`, &rows)
		var text string
		b.eval(t, `document.getElementById('errors').innerText`, &text)
		if !strings.Contains(text, "provider_error") || !strings.Contains(text, "unknown_format") || !strings.Contains(text, "unknown format") {
			t.Errorf("the errors page shows:\n%s", text)
		}
		var thumbs int
		b.eval(t, `document.querySelectorAll('#errors img.thumb').length`, &thumbs)
		if thumbs != 1 {
			t.Errorf("%d thumbnails on the errors page, want 1 (the refused photo; the unknown format shows its format)", thumbs)
		}
		b.screenshot(t, "console-errors")

		e.fail.Store(false) // the model takes the photo now
		// The row's own retry: only row 8 of rule html is reprocessed.
		b.run(t, chromedp.Click(chromedp.Search(`//table[@id='errors']//tr[td[2]/b[text()='html'] and td[2]//code[text()='{"id": 8}']]//button`)),
			chromedp.WaitVisible(chromedp.ID("confirm-retry")))
		var ask string
		b.eval(t, `document.querySelector('main h1').textContent`, &ask)
		if ask != "Retry 1 row?" {
			t.Errorf("the confirmation asks %q", ask)
		}
		if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.retry_requests"); n != 0 {
			t.Fatalf("%d retry requests before the confirmation", n)
		}
		b.run(t, chromedp.Click(chromedp.ID("confirm-retry")), chromedp.WaitVisible(chromedp.CSS(`p.ok`)))
		integration.WaitFor(t, 60*time.Second, "the retried error to resolve", func() bool {
			return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE rule = 'html' AND reason = 'provider_error' AND resolved_at IS NULL") == 0
		})
		if n := queryInt(t, s.conn, "SELECT count(*) FROM public.answers WHERE id = 8 AND answer IS NOT NULL"); n != 1 {
			t.Errorf("row 8 has no answer after the retry")
		}
		if n := queryInt(t, s.conn, `SELECT attempts FROM pgimageai.errors WHERE rule = 'html' AND source_key = '{"id": 7}' AND resolved_at IS NULL`); n != 1 {
			t.Errorf("row 7's error has %d attempts: the retry of row 8 reprocessed another row", n)
		}
		if n := queryInt(t, s.conn, `SELECT count(*) FROM pgimageai.retry_requests WHERE rule = 'html' AND source_key = '{"id": 8}' AND reason IS NULL`); n != 1 {
			t.Errorf("%d retry requests of row 8", n)
		}
	})

	if n := b.dialogs.Load(); n != 0 {
		t.Errorf("%d JavaScript dialogs opened in all", n)
	}
}

// httpGet GETs u, with token as a Bearer header when not "".
func httpGet(t *testing.T, u, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
