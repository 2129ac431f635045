package provider

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode"
)

// ParseBaseURL validates a non-empty models.base_url: an absolute http or
// https URL with a host, a port (if any) between 1 and 65535, and no query,
// fragment, white space or credentials. Providers append paths to it as
// strings, so anything after the path would swallow them.
//
// Credentials (user:password@host) are refused rather than used: keys live in
// the environment variable that api_key_env names, never in a table. No error
// message repeats a URL's user information, and a URL that does not parse is
// not echoed at all, since the text that failed may be a password.
func ParseBaseURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("base_url: empty")
	}
	if i := strings.IndexFunc(raw, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }); i >= 0 {
		return nil, errors.New("base_url: must not contain spaces or control characters")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("base_url: not a valid URL (%s)", parseProblem(err))
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		if u.Scheme == "" {
			return nil, fmt.Errorf("base_url %s: no scheme; write it as http://host[:port]/path or https://…", display(u))
		}
		return nil, fmt.Errorf("base_url %s: scheme must be http or https, got %q", display(u), u.Scheme)
	case u.User != nil:
		return nil, fmt.Errorf("base_url %s: must not contain credentials (user:password@); put the API key in the environment variable named by api_key_env", display(u))
	case u.Opaque != "" || u.Hostname() == "":
		return nil, fmt.Errorf("base_url %s: no host", display(u))
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(raw, "?#"):
		return nil, fmt.Errorf("base_url %s: must not have a query or fragment", display(u))
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("base_url %s: port %s is not between 1 and 65535", display(u), p)
		}
	}
	return u, nil
}

// display renders u for an error message without its user information, and
// an opaque URL (scheme:rest, e.g. "localhost:11434/v1" or
// "user:password@host") as its scheme alone.
func display(u *url.URL) string {
	if u.Opaque != "" {
		return strconv.Quote(u.Scheme + ":…")
	}
	c := *u
	c.User = nil
	return strconv.Quote(c.String())
}

// parseProblem returns what url.Parse objected to, without the quoted part of
// the URL its message names (an invalid port may be half a password).
func parseProblem(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // url.Error repeats the whole URL
	}
	msg, _, _ := strings.Cut(err.Error(), `"`)
	return strings.TrimSpace(msg)
}
