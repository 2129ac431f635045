package store

import (
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"
)

// maxRefLen bounds a reference: S3 keys are at most 1,024 bytes; URLs get
// twice that.
const maxRefLen = 2048

func badRef(format string, args ...any) *Error {
	return &Error{Reason: ReasonBadReference, Err: fmt.Errorf(format, args...)}
}

// checkKey refuses a key (or a URL path) that could leave its store or mean
// something else to another layer: empty, too long, not UTF-8, control
// characters, backslashes, an absolute path, or a "." or ".." segment — also
// once percent-decoded, and twice ("%2e%2e", "%252e%252e").
func checkKey(key string, allowLeadingSlash bool) *Error {
	if key == "" {
		return badRef("empty reference")
	}
	if len(key) > maxRefLen {
		return badRef("reference of %d bytes (at most %d)", len(key), maxRefLen)
	}
	if !allowLeadingSlash && strings.HasPrefix(key, "/") {
		return badRef("absolute path %q: a reference is relative to its store", clip(key))
	}
	s := key
	for range 3 {
		if !utf8.ValidString(s) {
			return badRef("reference is not UTF-8")
		}
		for _, r := range s {
			if r < 0x20 || r == 0x7f {
				return badRef("control character in reference %q", clip(key))
			}
			if r == '\\' {
				return badRef("backslash in reference %q", clip(key))
			}
		}
		for _, seg := range strings.Split(s, "/") {
			if seg == "." || seg == ".." {
				return badRef("%q segment in reference %q", seg, clip(key))
			}
		}
		d, err := url.PathUnescape(s)
		if err != nil || d == s {
			break
		}
		s = d
	}
	return nil
}

// clip shortens a reference for an error message.
func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}

// joinPrefix puts a key under a store's prefix ("photos/" + "a.jpg").
func joinPrefix(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + key
}

// normPrefix gives a prefix a trailing slash ("photos" → "photos/") and
// refuses one that is itself unsafe.
func normPrefix(p string) (string, error) {
	p = strings.Trim(p, "/")
	if p == "" {
		return "", nil
	}
	if e := checkKey(p, false); e != nil {
		return "", fmt.Errorf("prefix %q: %v", p, e.Err)
	}
	return p + "/", nil
}
