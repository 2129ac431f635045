package store

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// maxRedirects bounds the redirects of one request; a loop ends here.
const maxRedirects = 5

type httpStore struct {
	name   string
	base   *url.URL // scheme, host and a path ending in "/"
	opts   Options
	lim    *limiter
	client *http.Client
	auth   string // the Authorization header, sent to the base's origin only; "" = none
}

func openHTTP(cfg Config, env Env, o Options) (*httpStore, error) {
	if cfg.Endpoint == "" {
		return nil, errors.New("an http store needs an endpoint (its base URL)")
	}
	if cfg.Bucket != "" || cfg.Region != "" {
		return nil, errors.New("bucket and region are for s3 stores")
	}
	base, err := url.Parse(cfg.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("endpoint: %w", err)
	}
	switch {
	case base.Scheme != "https" && !(base.Scheme == "http" && o.AllowHTTP):
		return nil, fmt.Errorf("endpoint %q: https only (set allow_http for plain http)", cfg.Endpoint)
	case base.User != nil:
		return nil, fmt.Errorf("endpoint: no user information in the URL (use access_key_env/secret_key_env)")
	case base.Host == "" || base.Opaque != "":
		return nil, fmt.Errorf("endpoint %q: want a URL like https://cdn.example.com/images/", cfg.Endpoint)
	case base.RawQuery != "" || base.Fragment != "":
		return nil, fmt.Errorf("endpoint %q: no query or fragment in a base URL", cfg.Endpoint)
	}
	prefix, err := normPrefix(cfg.Prefix)
	if err != nil {
		return nil, err
	}
	p := base.EscapedPath()
	if !strings.HasSuffix(p, "/") {
		p += "/"
	}
	if e := checkKey(p, true); e != nil {
		return nil, fmt.Errorf("endpoint: %v", e.Err)
	}
	base, err = url.Parse(base.Scheme + "://" + base.Host + p + prefix)
	if err != nil {
		return nil, fmt.Errorf("endpoint: %w", err)
	}
	base.Host = strings.ToLower(base.Host)
	s := &httpStore{name: cfg.Name, base: base, opts: o, lim: newLimiter(o)}
	getenv := env.getenv()
	switch {
	case cfg.SecretKeyEnv != "":
		secret := getenv(cfg.SecretKeyEnv)
		if secret == "" {
			return nil, fmt.Errorf("environment variable %s is not set", cfg.SecretKeyEnv)
		}
		s.auth = "Bearer " + secret
		if cfg.AccessKeyEnv != "" {
			user := getenv(cfg.AccessKeyEnv)
			if user == "" {
				return nil, fmt.Errorf("environment variable %s is not set", cfg.AccessKeyEnv)
			}
			s.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+secret))
		}
	case cfg.AccessKeyEnv != "":
		return nil, errors.New("access_key_env needs secret_key_env (a bearer token alone is secret_key_env)")
	}
	d := &safeDialer{allowPrivate: o.AllowPrivate, lookup: env.lookup(), dial: env.dial()}
	s.client = newStoreHTTPClient(env, o, d.DialContext)
	s.client.CheckRedirect = s.checkRedirect
	return s, nil
}

func defaultPort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "http" {
		return "80"
	}
	return "443"
}

func (s *httpStore) sameOrigin(u *url.URL) bool {
	return u.Scheme == s.base.Scheme && strings.EqualFold(u.Hostname(), s.base.Hostname()) && defaultPort(u) == defaultPort(s.base)
}

// allowed checks that u lies inside the store: its scheme, no user
// information, and either the base's origin and path prefix or a host of
// allow_hosts; its path never climbs out.
func (s *httpStore) allowed(u *url.URL) error {
	switch {
	case u.User != nil:
		return badRef("user information in URL %q", clip(redact(u)))
	case u.Scheme != "https" && !(u.Scheme == "http" && s.opts.AllowHTTP):
		return badRef("scheme %q is not allowed (https only unless allow_http)", u.Scheme)
	case u.Host == "" || u.Opaque != "":
		return badRef("URL %q has no host", clip(u.String()))
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	if e := checkKey(path, true); e != nil {
		return e
	}
	if s.sameOrigin(u) {
		if !strings.HasPrefix(path, s.base.EscapedPath()) {
			return badRef("path %q is not under the store's %q", clip(path), s.base.EscapedPath())
		}
		return nil
	}
	if hostAllowed(s.opts.AllowHosts, u.Hostname(), u.Port()) {
		return nil
	}
	return badRef("host %q is not the store's (%s) nor in allow_hosts", u.Host, s.base.Host)
}

func redact(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}

// resolve turns a reference into the URL to fetch: a path relative to the
// base URL (with an optional query), or an absolute URL inside the store.
func (s *httpStore) resolve(ref string) (*url.URL, error) {
	if len(ref) > maxRefLen {
		return nil, badRef("reference of %d bytes (at most %d)", len(ref), maxRefLen)
	}
	if i := strings.Index(ref, "#"); i >= 0 {
		ref = ref[:i]
	}
	var u *url.URL
	if strings.Contains(ref, "://") || strings.HasPrefix(ref, "//") {
		var err error
		if u, err = url.Parse(ref); err != nil {
			return nil, badRef("unparseable URL: %v", err)
		}
		u.Scheme = strings.ToLower(u.Scheme)
	} else {
		path, query, _ := strings.Cut(ref, "?")
		if e := checkKey(path, false); e != nil {
			return nil, e
		}
		if _, err := url.PathUnescape(path); err != nil {
			return nil, badRef("reference %q: %v", clip(ref), err)
		}
		var err error
		if u, err = url.Parse(s.base.String() + path); err != nil {
			return nil, badRef("reference %q: %v", clip(ref), err)
		}
		if query != "" {
			u.RawQuery = query
		}
		if !s.sameOrigin(u) { // "a:b" and the like must not become another URL
			return nil, badRef("reference %q leaves the store", clip(ref))
		}
	}
	if err := s.allowed(u); err != nil {
		return nil, err
	}
	return u, nil
}

func (s *httpStore) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > maxRedirects {
		return badRef("more than %d redirects (a loop?) from %q", maxRedirects, clip(redact(via[0].URL)))
	}
	if err := s.allowed(req.URL); err != nil {
		var e *Error
		if errors.As(err, &e) {
			return &Error{Reason: ReasonBadReference, Err: fmt.Errorf("redirect to %q refused: %v", clip(redact(req.URL)), e.Err)}
		}
		return err
	}
	if !s.sameOrigin(req.URL) {
		req.Header.Del("Authorization")
	}
	return nil
}

func (s *httpStore) newRequest(ctx context.Context, method string, u *url.URL) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return nil, badRef("%v", err)
	}
	req.Header.Set("User-Agent", "pgimageai")
	if s.auth != "" && s.sameOrigin(u) {
		req.Header.Set("Authorization", s.auth)
	}
	return req, nil
}

func (s *httpStore) Stat(ctx context.Context, ref string) (Info, error) {
	u, err := s.resolve(ref)
	if err != nil {
		return Info{}, err
	}
	var info Info
	err = s.lim.do(ctx, func(ctx context.Context) error {
		req, err := s.newRequest(ctx, http.MethodHead, u)
		if err != nil {
			return err
		}
		resp, err := s.client.Do(req)
		if err != nil {
			return httpTransportError(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusNotImplemented {
			return s.statByRange(ctx, u, &info)
		}
		if err := statusError(resp); err != nil {
			return err
		}
		info = Info{Size: resp.ContentLength, Version: httpVersion(resp.Header)}
		return nil
	})
	return info, err
}

// statByRange asks for the first byte of a server that does not answer
// HEAD, and reads the size from Content-Range.
func (s *httpStore) statByRange(ctx context.Context, u *url.URL, info *Info) error {
	req, err := s.newRequest(ctx, http.MethodGet, u)
	if err != nil {
		return err
	}
	req.Header.Set("Range", "bytes=0-0")
	resp, err := s.client.Do(req)
	if err != nil {
		return httpTransportError(err)
	}
	defer resp.Body.Close()
	if err := statusError(resp); err != nil {
		return err
	}
	*info = Info{Size: -1, Version: httpVersion(resp.Header)}
	if _, total, ok := strings.Cut(resp.Header.Get("Content-Range"), "/"); ok && resp.StatusCode == http.StatusPartialContent {
		if n, err := strconv.ParseInt(total, 10, 64); err == nil {
			info.Size = n
		}
	} else if resp.StatusCode == http.StatusOK {
		info.Size = resp.ContentLength
	}
	return nil
}

func (s *httpStore) Fetch(ctx context.Context, ref string, maxBytes int64) ([]byte, Info, error) {
	u, err := s.resolve(ref)
	if err != nil {
		return nil, Info{}, err
	}
	limit := effectiveLimit(maxBytes, s.opts)
	var body []byte
	var info Info
	err = s.lim.do(ctx, func(ctx context.Context) error {
		req, err := s.newRequest(ctx, http.MethodGet, u)
		if err != nil {
			return err
		}
		resp, err := s.client.Do(req)
		if err != nil {
			return httpTransportError(err)
		}
		defer resp.Body.Close()
		if err := statusError(resp); err != nil {
			return err
		}
		info = Info{Size: resp.ContentLength, Version: httpVersion(resp.Header)}
		body, err = readBounded(resp.Body, resp.ContentLength, limit)
		return err
	})
	return body, info, err
}

func httpVersion(h http.Header) string {
	if e := h.Get("ETag"); e != "" {
		return strings.Trim(strings.TrimPrefix(e, "W/"), `"`)
	}
	return h.Get("Last-Modified")
}

// httpTransportError keeps a refusal of ours (a redirect, an address) as it
// is and makes every other failure to get an answer transient.
func httpTransportError(err error) error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	return transient(err)
}

func statusError(resp *http.Response) error {
	c := resp.StatusCode
	msg := fmt.Errorf("HTTP %s from %s", resp.Status, redact(resp.Request.URL))
	switch {
	case c >= 200 && c < 300:
		return nil
	case c == http.StatusNotFound || c == http.StatusGone:
		return &Error{Reason: ReasonNotFound, Err: msg}
	case c == http.StatusUnauthorized || c == http.StatusForbidden:
		return &Error{Reason: ReasonForbidden, Err: msg}
	case c == http.StatusTooManyRequests || c == http.StatusRequestTimeout || c >= 500:
		return transient(msg)
	case c >= 300 && c < 400:
		return badRef("%v: a redirect without a usable Location", msg)
	}
	return badRef("%v", msg)
}
