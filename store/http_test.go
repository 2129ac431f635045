package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// netHooks are an Env's network, watched: every name lookup is answered
// from a table (nothing reaches a real resolver), every dial is recorded.
type netHooks struct {
	mu      sync.Mutex
	dials   []string
	lookups []string
	hosts   map[string][]net.IP
}

func newNetHooks() *netHooks {
	return &netHooks{hosts: map[string][]net.IP{
		"localhost":         {net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
		"metadata.internal": {net.ParseIP("169.254.169.254")},
		"rebind.test":       {net.ParseIP("93.184.215.14"), net.ParseIP("127.0.0.1")},
		"private.test":      {net.ParseIP("10.1.2.3")},
	}}
}

func (h *netHooks) env() Env {
	return Env{
		LookupIP: func(_ context.Context, host string) ([]net.IP, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.lookups = append(h.lookups, host)
			if ips, ok := h.hosts[host]; ok {
				return ips, nil
			}
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		},
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			h.mu.Lock()
			h.dials = append(h.dials, addr)
			h.mu.Unlock()
			host, _, _ := net.SplitHostPort(addr)
			if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
				return nil, fmt.Errorf("test dialer: refusing to connect to non-loopback %s", addr)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
}

func (h *netHooks) dialed() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.dials...)
}

// origin is an httptest server on 127.0.0.1 serving a few paths, counting
// requests and keeping the Authorization headers it saw.
type origin struct {
	*httptest.Server
	requests atomic.Int64
	mu       sync.Mutex
	auth     []string
}

func newOrigin(t *testing.T, handler func(o *origin, w http.ResponseWriter, r *http.Request)) *origin {
	o := &origin{}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.requests.Add(1)
		o.mu.Lock()
		o.auth = append(o.auth, r.Header.Get("Authorization"))
		o.mu.Unlock()
		handler(o, w, r)
	}))
	t.Cleanup(o.Close)
	return o
}

func (o *origin) port() string { _, p, _ := net.SplitHostPort(o.Listener.Addr().String()); return p }

func imageHandler(other *origin) func(o *origin, w http.ResponseWriter, r *http.Request) {
	return func(o *origin, w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/img/a.jpg", "/img/sub/b.jpg":
			w.Header().Set("ETag", `"v1"`)
			w.Write([]byte("JPEGDATA"))
		case "/img/missing.jpg":
			http.NotFound(w, r)
		case "/img/forbidden.jpg":
			http.Error(w, "no", http.StatusForbidden)
		case "/img/down.jpg":
			http.Error(w, "down", http.StatusServiceUnavailable)
		case "/img/busy.jpg":
			http.Error(w, "busy", http.StatusTooManyRequests)
		case "/img/huge.jpg": // a 10 GB Content-Length, a few bytes sent
			w.Header().Set("Content-Length", strconv.FormatInt(10<<30, 10))
			w.WriteHeader(http.StatusOK)
			w.Write([]byte("JPEG"))
		case "/img/short.jpg": // fewer bytes than announced
			w.Header().Set("Content-Length", "100")
			w.WriteHeader(http.StatusOK)
			w.Write([]byte("JPEG"))
		case "/img/chunked-big.jpg": // no Content-Length, past any bound
			w.(http.Flusher).Flush()
			for range 64 {
				w.Write(make([]byte, 1024))
			}
		case "/img/slow.jpg":
			time.Sleep(500 * time.Millisecond)
			w.Write([]byte("late"))
		case "/img/redirect-inside":
			http.Redirect(w, r, "/img/a.jpg", http.StatusFound)
		case "/img/redirect-outside-prefix":
			http.Redirect(w, r, "/secret/a.jpg", http.StatusFound)
		case "/img/redirect-loop":
			http.Redirect(w, r, "/img/redirect-loop", http.StatusFound)
		case "/img/redirect-other-port":
			http.Redirect(w, r, other.URL+"/img/a.jpg", http.StatusFound)
		case "/img/redirect-localhost":
			http.Redirect(w, r, "http://localhost:"+o.port()+"/img/a.jpg", http.StatusFound)
		case "/img/redirect-metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		case "/img/redirect-ipv6":
			http.Redirect(w, r, "http://[::1]:"+o.port()+"/img/a.jpg", http.StatusFound)
		case "/img/redirect-userinfo":
			http.Redirect(w, r, "http://user:pw@127.0.0.1:"+o.port()+"/img/a.jpg", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}
}

func openHTTPTest(t *testing.T, h *netHooks, endpoint string, options string, env ...func(*Env)) Store {
	t.Helper()
	e := h.env()
	for _, f := range env {
		f(&e)
	}
	st, err := Open(Config{Name: "h", Kind: "http", Endpoint: endpoint, Options: json.RawMessage(options)}, e)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestHTTPStore(t *testing.T) {
	other := newOrigin(t, func(o *origin, w http.ResponseWriter, r *http.Request) { w.Write([]byte("OTHER")) })
	srv := newOrigin(t, imageHandler(other))
	h := newNetHooks()
	st := openHTTPTest(t, h, srv.URL+"/img/", `{"allow_private": true, "allow_http": true, "retries": 1, "timeout": "200ms"}`)
	p := srv.port()
	tests := []struct {
		ref    string
		want   string
		reason string
	}{
		{"a.jpg", "JPEGDATA", ""},
		{"sub/b.jpg", "JPEGDATA", ""},
		{"a.jpg?w=100#frag", "JPEGDATA", ""},
		{srv.URL + "/img/a.jpg", "JPEGDATA", ""},
		{"redirect-inside", "JPEGDATA", ""},
		{"missing.jpg", "", ReasonNotFound},
		{"forbidden.jpg", "", ReasonForbidden},
		{"down.jpg", "", ReasonStoreUnavailable},
		{"busy.jpg", "", ReasonStoreUnavailable},
		{"huge.jpg", "", ReasonTooLarge},
		{"short.jpg", "", ReasonStoreUnavailable},
		{"chunked-big.jpg", "", ReasonTooLarge},
		{"slow.jpg", "", ReasonStoreUnavailable},
		{"redirect-outside-prefix", "", ReasonBadReference},
		{"redirect-loop", "", ReasonBadReference},
		{"redirect-other-port", "", ReasonBadReference},
		{"redirect-localhost", "", ReasonBadReference},
		{"redirect-metadata", "", ReasonBadReference},
		{"redirect-ipv6", "", ReasonBadReference},
		{"redirect-userinfo", "", ReasonBadReference},
		{"../secret/a.jpg", "", ReasonBadReference},
		{"%2e%2e/secret/a.jpg", "", ReasonBadReference},
		{"/secret/a.jpg", "", ReasonBadReference},
		{"//evil.test/a.jpg", "", ReasonBadReference},
		{srv.URL + "/secret/a.jpg", "", ReasonBadReference},
		{srv.URL + "/img/../secret/a.jpg", "", ReasonBadReference},
		{srv.URL + "/img/%2e%2e/secret/a.jpg", "", ReasonBadReference},
		{other.URL + "/img/a.jpg", "", ReasonBadReference},
		{"http://localhost:" + p + "/img/a.jpg", "", ReasonBadReference},
		{"http://user:pw@127.0.0.1:" + p + "/img/a.jpg", "", ReasonBadReference},
		{"http://[::1]:" + p + "/img/a.jpg", "", ReasonBadReference},
		{"http://169.254.169.254/latest/meta-data/", "", ReasonBadReference},
		{"https://127.0.0.1:" + p + "/img/a.jpg", "", ReasonBadReference}, // another origin: the scheme differs
		{"ftp://127.0.0.1:" + p + "/img/a.jpg", "", ReasonBadReference},
		{"javascript:alert(1)", "", ReasonNotFound}, // a relative key, not a URL: it stays in the store
		{"a.jpg\r\nHost: evil", "", ReasonBadReference},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			before := len(h.dialed())
			otherBefore := other.requests.Load()
			body, info, err := st.Fetch(context.Background(), tt.ref, 1024)
			if ReasonOf(err) != tt.reason {
				t.Fatalf("Fetch = %q, %v; want reason %q", body, err, tt.reason)
			}
			if other.requests.Load() != otherBefore {
				t.Errorf("the other origin was asked")
			}
			for _, a := range h.dialed()[before:] {
				if a != "127.0.0.1:"+p {
					t.Errorf("dialed %s", a)
				}
			}
			if tt.reason == "" {
				if string(body) != tt.want || info.Version != "v1" || info.Size != int64(len(tt.want)) {
					t.Errorf("Fetch = %q, %+v", body, info)
				}
				return
			}
			if body != nil {
				t.Errorf("a refused fetch returned %d bytes", len(body))
			}
			if (tt.reason == ReasonStoreUnavailable) != IsTransient(err) {
				t.Errorf("transient = %v for %v", IsTransient(err), err)
			}
		})
	}
	t.Run("stat", func(t *testing.T) {
		info, err := st.Stat(context.Background(), "a.jpg")
		if err != nil || info.Size != 8 || info.Version != "v1" {
			t.Errorf("Stat = %+v, %v", info, err)
		}
		info, err = st.Stat(context.Background(), "huge.jpg")
		if err != nil || info.Size != 10<<30 {
			t.Errorf("Stat(huge) = %+v, %v", info, err)
		}
		if _, err := st.Stat(context.Background(), "missing.jpg"); ReasonOf(err) != ReasonNotFound {
			t.Errorf("Stat(missing) = %v", err)
		}
	})
}

// TestHTTPStoreRefusesPrivateAddresses: without allow_private, every
// loopback, private, link-local or metadata address is refused before any
// connection, whatever name leads to it.
func TestHTTPStoreRefusesPrivateAddresses(t *testing.T) {
	srv := newOrigin(t, imageHandler(nil))
	p := srv.port()
	tests := []struct{ name, endpoint string }{
		{"127.0.0.1", "http://127.0.0.1:" + p + "/img/"},
		{"localhost", "http://localhost:" + p + "/img/"},
		{"::1", "http://[::1]:" + p + "/img/"},
		{"v4-mapped", "http://[::ffff:127.0.0.1]:" + p + "/img/"},
		{"metadata IP", "http://169.254.169.254/latest/"},
		{"metadata name", "http://metadata.internal/latest/"},
		{"unspecified", "http://0.0.0.0:" + p + "/img/"},
		{"private", "http://private.test/img/"},
		{"rebinding: one public, one loopback", "http://rebind.test:" + p + "/img/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newNetHooks()
			st := openHTTPTest(t, h, tt.endpoint, `{"allow_http": true}`)
			_, _, err := st.Fetch(context.Background(), "a.jpg", 1024)
			if ReasonOf(err) != ReasonBadReference || IsTransient(err) {
				t.Errorf("Fetch = %v, want bad_reference", err)
			}
			if _, err := st.Stat(context.Background(), "a.jpg"); ReasonOf(err) != ReasonBadReference {
				t.Errorf("Stat = %v, want bad_reference", err)
			}
			if d := h.dialed(); len(d) != 0 {
				t.Errorf("dialed %v", d)
			}
		})
	}
	if n := srv.requests.Load(); n != 0 {
		t.Errorf("the server got %d requests", n)
	}
}

// TestHTTPStoreCredentials: the store's key goes to its own origin only,
// never to a host of allow_hosts nor across a redirect to one.
func TestHTTPStoreCredentials(t *testing.T) {
	cdn := newOrigin(t, func(o *origin, w http.ResponseWriter, r *http.Request) { w.Write([]byte("CDN")) })
	srv := newOrigin(t, func(o *origin, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/img/to-cdn" {
			http.Redirect(w, r, cdn.URL+"/any/a.jpg", http.StatusFound)
			return
		}
		w.Write([]byte("OWN"))
	})
	h := newNetHooks()
	opts := fmt.Sprintf(`{"allow_private": true, "allow_http": true, "allow_hosts": ["127.0.0.1:%s"]}`, cdn.port())
	const token = "s3cr3t-token"
	env := h.env()
	env.Getenv = func(k string) string {
		if k == "IMG_TOKEN" {
			return token
		}
		return ""
	}
	st, err := Open(Config{Name: "h", Kind: "http", Endpoint: srv.URL + "/img/", SecretKeyEnv: "IMG_TOKEN", Options: json.RawMessage(opts)},
		env)
	if err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]string{"a.jpg": "OWN", "to-cdn": "CDN", cdn.URL + "/elsewhere/b.jpg": "CDN"} {
		body, _, err := st.Fetch(context.Background(), ref, 100)
		if err != nil || string(body) != want {
			t.Errorf("Fetch(%q) = %q, %v; want %q", ref, body, err, want)
		}
	}
	if len(srv.auth) != 2 || srv.auth[0] != "Bearer "+token {
		t.Errorf("the store's origin saw %q", srv.auth)
	}
	for _, a := range cdn.auth {
		if a != "" {
			t.Errorf("an allowed host got the store's credentials: %q", a)
		}
	}
	if len(cdn.auth) != 2 {
		t.Errorf("the allowed host got %d requests, want 2", len(cdn.auth))
	}
}

func TestHTTPStoreConcurrency(t *testing.T) {
	var inFlight, peak atomic.Int64
	srv := newOrigin(t, func(o *origin, w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
		w.Write([]byte("x"))
	})
	st := openHTTPTest(t, newNetHooks(), srv.URL+"/", `{"allow_private": true, "allow_http": true, "max_concurrency": 2}`)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if _, _, err := st.Fetch(context.Background(), "a.jpg", 10); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p != 2 {
		t.Errorf("peak requests in flight = %d, want 2 (max_concurrency)", p)
	}
}

func TestHTTPStoreRetries(t *testing.T) {
	srv := newOrigin(t, func(o *origin, w http.ResponseWriter, r *http.Request) {
		if o.requests.Load() == 1 {
			http.Error(w, "once", http.StatusBadGateway)
			return
		}
		w.Write([]byte("ok"))
	})
	st := openHTTPTest(t, newNetHooks(), srv.URL+"/", `{"allow_private": true, "allow_http": true, "retries": 2}`)
	body, _, err := st.Fetch(context.Background(), "a", 10)
	if err != nil || string(body) != "ok" || srv.requests.Load() != 2 {
		t.Errorf("Fetch = %q, %v after %d requests", body, err, srv.requests.Load())
	}
	down := newOrigin(t, func(o *origin, w http.ResponseWriter, r *http.Request) { http.Error(w, "x", 500) })
	st = openHTTPTest(t, newNetHooks(), down.URL+"/", `{"allow_private": true, "allow_http": true, "retries": 2}`)
	if _, _, err := st.Fetch(context.Background(), "a", 10); !IsTransient(err) || down.requests.Load() != 3 {
		t.Errorf("Fetch = %v after %d requests, want transient after 3", err, down.requests.Load())
	}
}

// TestHTTPStoreBodyPastContentLength: a server that sends more than its
// Content-Length never gets the excess into the image.
func TestHTTPStoreBodyPastContentLength(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				c.Read(buf)
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nJPEG%s", strings.Repeat("X", 20))
			}()
		}
	}()
	st := openHTTPTest(t, newNetHooks(), "http://"+ln.Addr().String()+"/", `{"allow_private": true, "allow_http": true}`)
	body, _, err := st.Fetch(context.Background(), "a", 100)
	if strings.Contains(string(body), "X") {
		t.Fatalf("the bytes past Content-Length reached the image: %q, %v", body, err)
	}
}

func TestOpenHTTPStore(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		err  string
	}{
		{"no endpoint", Config{Kind: "http"}, "needs an endpoint"},
		{"plain http", Config{Kind: "http", Endpoint: "http://cdn.example.com/"}, "https only"},
		{"userinfo", Config{Kind: "http", Endpoint: "https://u:p@cdn.example.com/"}, "no user information"},
		{"query", Config{Kind: "http", Endpoint: "https://cdn.example.com/?a=b"}, "no query"},
		{"a bucket", Config{Kind: "http", Endpoint: "https://cdn.example.com/", Bucket: "b"}, "for s3 stores"},
		{"missing token", Config{Kind: "http", Endpoint: "https://cdn.example.com/", SecretKeyEnv: "NOPE_TOKEN"}, "NOPE_TOKEN is not set"},
		{"access alone", Config{Kind: "http", Endpoint: "https://cdn.example.com/", AccessKeyEnv: "U"}, "needs secret_key_env"},
		{"bad prefix", Config{Kind: "http", Endpoint: "https://cdn.example.com/", Prefix: "../x"}, `".." segment`},
		{"unknown kind", Config{Kind: "htpp"}, `unknown kind "htpp" (did you mean "http"?)`},
		{"fine", Config{Kind: "http", Endpoint: "https://cdn.example.com/images"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Open(tt.cfg, Env{Getenv: func(string) string { return "" }})
			if tt.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("Open = %v, want an error containing %q", err, tt.err)
			}
		})
	}
}

// TestHTTPStoreCallerCancel: the caller's cancellation is ctx's error, not a
// store outage (a row must not park because its caller stopped).
func TestHTTPStoreCallerCancel(t *testing.T) {
	release := make(chan struct{})
	srv := newOrigin(t, func(o *origin, w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	st := openHTTPTest(t, newNetHooks(), srv.URL+"/", `{"allow_private": true, "allow_http": true, "timeout": "10s"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := st.Fetch(ctx, "a", 10)
	if !errors.Is(err, context.DeadlineExceeded) || ReasonOf(err) != "" {
		t.Errorf("Fetch = %v, want the caller's context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Fetch took %s after its context ended", d)
	}
}
