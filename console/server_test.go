package console

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	_ "image/jpeg"
	_ "image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/state"
)

const testToken = "s3cret-console-token-0123456789"

// hostile is what a model (or a row) may say to break the page.
var hostile = []string{`<img src=x onerror=alert(1)>`, `</script><script>alert(2)</script>`, `" onmouseover="alert(3)`}

func hostileSource(t testing.TB) *fakeSource {
	caption := strings.Join(hostile, " ")
	jpg := testJPEG(t, 640, 480)
	f := &fakeSource{
		overview: func() Overview {
			return Overview{At: time.Now(), Slot: SlotView{Name: "pgimageai", Found: true, Active: true, WALStatus: "reserved"},
				Rules: []RuleView{{RuleListing: state.RuleListing{Name: "caption", Function: "AI_IMAGE_COMPLETE", Model: "vision",
					SourceTable: "public.photos", ImageColumn: "img", TargetTable: "public.captions", TargetColumn: "caption", Enabled: true,
					Invalid: ""}, State: "valid"},
					{RuleListing: state.RuleListing{Name: "bad" + hostile[0], Enabled: true, Invalid: hostile[1]}, State: "invalid"}},
				Errors: []state.ErrorCount{{Rule: "caption", Reason: functions.ProviderError, Count: 2}}}
		},
		results: func(rule string, q ResultQuery) (ResultPage, error) {
			if rule != "caption" {
				return ResultPage{}, ErrNoRule
			}
			return ResultPage{Rule: state.RuleListing{Name: "caption", Function: "AI_IMAGE_COMPLETE"},
				Results: []Result{{Key: keyJSON(2), Caption: &caption}, {Key: `{"id": "` + hostile[2] + `"}`, Caption: &caption}}}, nil
		},
		errs: []state.ConsoleError{{OpenError: state.OpenError{ID: 1, Rule: "caption", SourceTable: "public.photos",
			SourceKey: json.RawMessage(keyJSON(1)), Reason: functions.ProviderError, Detail: "HTTP 400: " + hostile[0], Attempts: 2,
			ImageBytes: ptr(int32(len(jpg)))}, ImageHead: jpg[:16]},
			{OpenError: state.OpenError{ID: 2, Rule: "caption", SourceTable: "public.photos",
				SourceKey: json.RawMessage(keyJSON(9)), Reason: functions.UnknownFormat, Detail: "not an image", Attempts: 1,
				ImageBytes: ptr(int32(5))}, ImageHead: []byte("hello")}},
		image: func(rule, key string) ([]byte, error) {
			if key == keyJSON(9) {
				return []byte("hello"), nil
			}
			return jpg, nil
		},
	}
	return f
}

func ptr[T any](v T) *T { return &v }

func newTestServer(t testing.TB, src Source, allowRetry bool) *httptest.Server {
	t.Helper()
	s, err := New(Config{Token: testToken, AllowRetry: allowRetry}, src)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts
}

// client does requests without following redirects.
func client() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type auth int

const (
	noAuth auth = iota
	bearer
	wrongBearer
)

func do(t testing.TB, ts *httptest.Server, method, path string, a auth, form url.Values, cookie *http.Cookie) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, ts.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	switch a {
	case bearer:
		req.Header.Set("Authorization", "Bearer "+testToken)
	case wrongBearer:
		req.Header.Set("Authorization", "Bearer "+testToken+"x")
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	resp, err := client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var pagePaths = []string{"/", "/rules/caption", "/errors", "/errors?rule=caption&reason=provider_error",
	"/thumb?rule=caption&key=" + url.QueryEscape(keyJSON(1)), "/rules/caption?similar=" + url.QueryEscape(keyJSON(2)), "/no-such-page"}

func TestUnauthorized(t *testing.T) {
	src := hostileSource(t)
	ts := newTestServer(t, src, true)
	type tc struct {
		name, method, path string
		a                  auth
		cookie             *http.Cookie
	}
	var cases []tc
	for _, p := range pagePaths {
		cases = append(cases,
			tc{"no token " + p, "GET", p, noAuth, nil},
			tc{"wrong bearer " + p, "GET", p, wrongBearer, nil},
			tc{"forged cookie " + p, "GET", p, noAuth, &http.Cookie{Name: CookieName, Value: "forged"}})
	}
	cases = append(cases, tc{"retry", "POST", "/retry", noAuth, nil}, tc{"logout", "POST", "/logout", noAuth, nil})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var form url.Values
			if c.method == "POST" {
				form = url.Values{"rule": {"caption"}, "confirm": {"yes"}}
			}
			resp, body := do(t, ts, c.method, c.path, c.a, form, c.cookie)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", resp.StatusCode)
			}
			if strings.Contains(body, "caption&#34;") || strings.Contains(body, "onerror") || strings.Contains(resp.Header.Get("Content-Type"), "image") {
				t.Fatalf("a 401 shows data: %s", body)
			}
		})
	}
	if src.retried.Load() != 0 {
		t.Fatal("an unauthenticated POST retried")
	}
	if resp, body := do(t, ts, "GET", "/healthz", noAuth, nil, nil); resp.StatusCode != 200 || strings.TrimSpace(body) != "ok" {
		t.Fatalf("/healthz: %d %q", resp.StatusCode, body)
	}
}

// login logs in through the form and returns the session cookie.
func login(t testing.TB, ts *httptest.Server) *http.Cookie {
	t.Helper()
	resp, _ := do(t, ts, "POST", "/login", noAuth, url.Values{"token": {testToken}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: status %d", resp.StatusCode)
	}
	for _, c := range resp.Cookies() {
		if c.Name == CookieName {
			return c
		}
	}
	t.Fatal("login set no session cookie")
	return nil
}

func TestBearerAndCookie(t *testing.T) {
	ts := newTestServer(t, hostileSource(t), false)
	cookie := login(t, ts)
	if !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/" {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/", cookie)
	}
	if cookie.Value == testToken || strings.Contains(cookie.Value, testToken) {
		t.Fatal("the cookie carries the token")
	}
	for _, p := range pagePaths[:6] {
		for _, c := range []struct {
			name   string
			a      auth
			cookie *http.Cookie
		}{{"bearer", bearer, nil}, {"cookie", noAuth, cookie}} {
			t.Run(c.name+" "+p, func(t *testing.T) {
				resp, body := do(t, ts, "GET", p, c.a, nil, c.cookie)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d: %s", resp.StatusCode, body)
				}
				if strings.Contains(body, testToken) {
					t.Fatal("the page shows the token")
				}
			})
		}
	}
	// A wrong token at the login form sets no cookie.
	resp, body := do(t, ts, "POST", "/login", noAuth, url.Values{"token": {"not-the-token-at-all"}}, nil)
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 || strings.Contains(body, testToken) {
		t.Fatalf("wrong login: status %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	// Logging out ends the session.
	csrf := csrfOf(t, ts, cookie)
	if resp, _ := do(t, ts, "POST", "/logout", noAuth, url.Values{"csrf": {csrf}}, cookie); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: status %d", resp.StatusCode)
	}
	if resp, _ := do(t, ts, "GET", "/", noAuth, nil, cookie); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("after logout: status %d, want 401", resp.StatusCode)
	}
}

func TestLoginFromAnotherSite(t *testing.T) {
	ts := newTestServer(t, hostileSource(t), false)
	for _, h := range []struct{ name, header, value string }{
		{"sec-fetch-site", "Sec-Fetch-Site", "cross-site"},
		{"origin", "Origin", "https://evil.example"},
	} {
		t.Run(h.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", ts.URL+"/login", strings.NewReader(url.Values{"token": {testToken}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set(h.header, h.value)
			resp, err := client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
				t.Fatalf("status %d, cookies %v: want 403 and none", resp.StatusCode, resp.Cookies())
			}
		})
	}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrfOf reads the CSRF token from the errors page.
func csrfOf(t testing.TB, ts *httptest.Server, cookie *http.Cookie) string {
	t.Helper()
	a := bearer
	if cookie != nil {
		a = noAuth
	}
	_, body := do(t, ts, "GET", "/errors", a, nil, cookie)
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no csrf field on the errors page:\n%s", body)
	}
	return m[1]
}

func TestRetry(t *testing.T) {
	for _, c := range []struct {
		name       string
		allow      bool
		form       url.Values
		useCSRF    bool
		cookie     bool
		wantStatus int
		wantRetry  int64
		wantBody   string
	}{
		{"no csrf", true, url.Values{"rule": {"caption"}, "confirm": {"yes"}}, false, true, 403, 0, "CSRF"},
		{"wrong csrf", true, url.Values{"rule": {"caption"}, "confirm": {"yes"}, "csrf": {"AAAA"}}, false, true, 403, 0, "CSRF"},
		{"bearer without csrf", true, url.Values{"rule": {"caption"}, "confirm": {"yes"}}, false, false, 403, 0, "CSRF"},
		{"not allowed", false, url.Values{"rule": {"caption"}, "confirm": {"yes"}}, true, true, 403, 0, "read-only"},
		{"asks first", true, url.Values{"rule": {"caption"}, "reason": {"provider_error"}}, true, true, 200, 0, "Yes, retry 3 rows"},
		{"invalid_rule refused", true, url.Values{"rule": {"caption"}, "reason": {"invalid_rule"}, "confirm": {"yes"}}, true, true, 400, 0, "editing the rule"},
		{"confirmed", true, url.Values{"rule": {"caption"}, "reason": {"provider_error"}, "confirm": {"yes"}}, true, true, 200, 1, "0/16B3748"},
		{"confirmed by bearer", true, url.Values{"rule": {"caption"}, "confirm": {"yes"}}, true, false, 200, 1, "Retry requested"},
		{"one row asks first", true, url.Values{"rule": {"caption"}, "key": {keyJSON(1)}}, true, true, 200, 0, "Yes, retry 1 row"},
		{"one row confirmed", true, url.Values{"rule": {"caption"}, "key": {keyJSON(1)}, "reason": {"provider_error"}, "confirm": {"yes"}}, true, true, 200, 1, "row <code>{&#34;id&#34;:1}</code> of rule <b>caption</b>"},
		{"one row without its rule", true, url.Values{"key": {keyJSON(1)}, "confirm": {"yes"}}, true, true, 400, 0, "names its rule"},
		{"one row, a key that is no JSON", true, url.Values{"rule": {"caption"}, "key": {"{id"}, "confirm": {"yes"}}, true, true, 400, 0, "as JSON"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := hostileSource(t)
			ts := newTestServer(t, src, c.allow)
			var cookie *http.Cookie
			a := bearer
			if c.cookie {
				cookie, a = login(t, ts), noAuth
			}
			if c.useCSRF {
				c.form.Set("csrf", csrfOf(t, ts, cookie))
			}
			resp, body := do(t, ts, "POST", "/retry", a, c.form, cookie)
			if resp.StatusCode != c.wantStatus || !strings.Contains(body, c.wantBody) {
				t.Fatalf("status %d, want %d with %q:\n%s", resp.StatusCode, c.wantStatus, c.wantBody, body)
			}
			if got := src.retried.Load(); got != c.wantRetry {
				t.Fatalf("%d retries, want %d", got, c.wantRetry)
			}
			if req, ok := src.lastRetry.Load().(RetryRequest); ok && c.form.Get("key") != "" && (req.Key != c.form.Get("key") || req.Reason != "") {
				t.Fatalf("retried %+v: want the row's key and no reason filter", req)
			}
		})
	}
}

// TestCSRFOfAnotherSession: a session's CSRF token is worth nothing to
// another session.
func TestCSRFOfAnotherSession(t *testing.T) {
	src := hostileSource(t)
	ts := newTestServer(t, src, true)
	a, b := login(t, ts), login(t, ts)
	resp, _ := do(t, ts, "POST", "/retry", noAuth, url.Values{"rule": {"caption"}, "confirm": {"yes"}, "csrf": {csrfOf(t, ts, a)}}, b)
	if resp.StatusCode != http.StatusForbidden || src.retried.Load() != 0 {
		t.Fatalf("status %d, %d retries: want 403 and none", resp.StatusCode, src.retried.Load())
	}
}

// TestGetChangesNothing: no GET, whatever its path or query, writes; GET
// /retry is not even routed.
func TestGetChangesNothing(t *testing.T) {
	src := hostileSource(t)
	ts := newTestServer(t, src, true)
	paths := append([]string{"/retry?rule=caption&confirm=yes", "/logout", "/login"}, pagePaths...)
	for _, p := range paths {
		t.Run(p, func(t *testing.T) {
			resp, _ := do(t, ts, "GET", p, bearer, nil, nil)
			if p == "/retry?rule=caption&confirm=yes" && resp.StatusCode != http.StatusMethodNotAllowed {
				t.Fatalf("GET /retry: status %d, want 405", resp.StatusCode)
			}
		})
	}
	if src.retried.Load() != 0 {
		t.Fatal("a GET retried")
	}
}

func TestHostileTextEscaped(t *testing.T) {
	ts := newTestServer(t, hostileSource(t), true)
	for _, p := range []string{"/", "/rules/caption", "/errors"} {
		t.Run(p, func(t *testing.T) {
			_, body := do(t, ts, "GET", p, bearer, nil, nil)
			for _, bad := range []string{"<img src=x", "<script>alert", `" onmouseover="`} {
				if strings.Contains(body, bad) {
					t.Errorf("the page has %q unescaped", bad)
				}
			}
			if !strings.Contains(body, "&lt;img src=x onerror=alert(1)&gt;") {
				t.Errorf("the hostile text is not shown as text:\n%s", body)
			}
			if strings.Count(body, "<script") != 1 || !strings.Contains(body, `<script src="/static/console.js" defer></script>`) {
				t.Error("the page has a script besides the console's own")
			}
		})
	}
}

func TestSecurityHeaders(t *testing.T) {
	ts := newTestServer(t, hostileSource(t), false)
	for _, c := range []struct {
		path string
		a    auth
	}{{"/", bearer}, {"/", noAuth}, {"/errors", bearer}, {"/healthz", noAuth}, {"/login", noAuth}, {"/static/console.css", noAuth},
		{"/thumb?rule=caption&key=" + url.QueryEscape(keyJSON(1)), bearer}} {
		t.Run(c.path, func(t *testing.T) {
			resp, _ := do(t, ts, "GET", c.path, c.a, nil, nil)
			csp := resp.Header.Get("Content-Security-Policy")
			for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "object-src 'none'"} {
				if !strings.Contains(csp, want) {
					t.Errorf("CSP %q lacks %q", csp, want)
				}
			}
			if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
				t.Errorf("CSP %q allows inline script", csp)
			}
			if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Error("no X-Content-Type-Options: nosniff")
			}
		})
	}
}

func TestThumbnail(t *testing.T) {
	src := hostileSource(t)
	ts := newTestServer(t, src, false)
	for _, c := range []struct {
		name, key  string
		wantStatus int
	}{
		{"jpeg scaled", keyJSON(1), 200},
		{"again from the cache", keyJSON(1), 200},
		{"not an image", keyJSON(9), 404},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := do(t, ts, "GET", "/thumb?rule=caption&key="+url.QueryEscape(c.key), bearer, nil, nil)
			if resp.StatusCode != c.wantStatus {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.wantStatus)
			}
			if c.wantStatus != 200 {
				return
			}
			cfg, format, err := image.DecodeConfig(bytes.NewReader([]byte(body)))
			if err != nil || format != "jpeg" || max(cfg.Width, cfg.Height) != ThumbSide {
				t.Fatalf("thumbnail %s %dx%d (%v); want a JPEG of %d px", format, cfg.Width, cfg.Height, err, ThumbSide)
			}
			if resp.Header.Get("Content-Type") != "image/jpeg" {
				t.Fatalf("Content-Type %q", resp.Header.Get("Content-Type"))
			}
		})
	}
}

// TestThumbnailCache: a cached thumbnail is served without the image's
// bytes being read again.
func TestThumbnailCache(t *testing.T) {
	jpg := testJPEG(t, 400, 300)
	var sent int
	src := &fakeSource{}
	src.image = func(rule, key string) ([]byte, error) { return jpg, nil }
	c := newThumbnailer(1 << 20)
	countingSrc := &countingImages{fakeSource: src, sent: &sent}
	for i := range 3 {
		th, err := c.get(t.Context(), countingSrc, "caption", keyJSON(1))
		if err != nil || len(th.data) == 0 {
			t.Fatalf("get %d: %v", i, err)
		}
	}
	if sent != 1 {
		t.Fatalf("the image's bytes were read %d times, want 1", sent)
	}
}

type countingImages struct {
	*fakeSource
	sent *int
}

func (c *countingImages) Image(ctx context.Context, rule, key string, have func([32]byte) bool) (ImageRead, error) {
	r, err := c.fakeSource.Image(ctx, rule, key, have)
	if r.Bytes != nil {
		*c.sent++
	}
	return r, err
}

func TestShortToken(t *testing.T) {
	if _, err := New(Config{Token: "short"}, &fakeSource{}); err == nil {
		t.Fatal("a short token was accepted")
	}
}
