package store

import (
	"net/url"
	"path"
	"strings"
	"testing"
)

var fuzzSeeds = []string{
	"a.jpg", "2026/a.jpg", "../a.jpg", "%2e%2e/a.jpg", "%252e%252e/x", "a/%2F../b", "s3://photos/app/a.jpg",
	"s3://photos/app/../b", "https://cdn.test/img/a.jpg", "https://cdn.test/img/../etc", "https://u:p@cdn.test/img/a",
	"//evil.test/a", "https://evil.test/img/a.jpg", "https://cdn.test:444/img/a", "http://cdn.test/img/a",
	"a.jpg?x=1", "a\\..\\b", "a\x00b", "https://CDN.test/img/a.jpg", "https://cdn.test/img%2f..%2fsecret",
	"https://cdn.test/img/./a", "https://[::1]/img/a", "https://cdn.test/imgx/a", "a:b/c", "https:cdn.test/img/a",
}

// escapes reports whether p, cleaned at each percent-decoding level, leaves
// dir (both rooted paths).
func escapes(dir, p string) bool {
	for range 4 {
		if c := path.Clean("/" + p); c != strings.TrimSuffix(dir, "/") && !strings.HasPrefix(c+"/", dir) {
			return true
		}
		if strings.Contains(p, "\\") {
			return true
		}
		d, err := url.PathUnescape(p)
		if err != nil || d == p {
			return false
		}
		p = d
	}
	return false
}

// FuzzS3Key: whatever a reference is, an accepted one names a key in the
// store's bucket under its prefix, at every decoding level.
func FuzzS3Key(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	s := &s3Store{bucket: "photos", prefix: "app/"}
	f.Fuzz(func(t *testing.T, ref string) {
		key, err := s.key(ref)
		if err != nil {
			if ReasonOf(err) != ReasonBadReference {
				t.Fatalf("key(%q): %v is not bad_reference", ref, err)
			}
			return
		}
		if !strings.HasPrefix(key, "app/") || escapes("/app/", key) {
			t.Fatalf("key(%q) = %q leaves the prefix", ref, key)
		}
	})
}

// FuzzHTTPResolve: an accepted reference is a URL of the store's origin
// under its path, or of an allowed host; never with user information, at
// every decoding level inside.
func FuzzHTTPResolve(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	s, err := openHTTP(Config{Kind: "http", Endpoint: "https://cdn.test/img/"}, Env{}, Options{AllowHosts: []string{"*.allowed.test"}, MaxConcurrency: 1, Timeout: DefaultTimeout})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		u, err := s.resolve(ref)
		if err != nil {
			if ReasonOf(err) != ReasonBadReference {
				t.Fatalf("resolve(%q): %v is not bad_reference", ref, err)
			}
			return
		}
		if u.User != nil || u.Scheme != "https" {
			t.Fatalf("resolve(%q) = %q", ref, u)
		}
		// What the request will carry, parsed again as a server would.
		again, err := url.Parse(u.String())
		if err != nil {
			t.Fatalf("resolve(%q) = %q, which does not parse: %v", ref, u, err)
		}
		switch h := strings.ToLower(again.Hostname()); {
		case h == "cdn.test" && again.Port() == "":
			if escapes("/img/", again.EscapedPath()) {
				t.Fatalf("resolve(%q) = %q leaves /img/", ref, u)
			}
		case strings.HasSuffix(h, ".allowed.test"):
		default:
			t.Fatalf("resolve(%q) = %q: another host", ref, u)
		}
	})
}
