package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Who may see the console: the holder of the token, as a Bearer header or
// through the session cookie the login page sets after checking it.

const (
	// CookieName is the session cookie's name.
	CookieName = "pgimageai_console"
	// sessionLife is how long a login lasts.
	sessionLife = 12 * time.Hour
	// maxSessions bounds the logins kept; the oldest goes first.
	maxSessions = 1024
	// MinTokenLength is the shortest token the console accepts.
	MinTokenLength = 16
)

// ident is who a request is: "bearer", or "session:" and its session's
// digest; "" for nobody.
type ident string

// sessions holds the logins, by the SHA-256 of their cookie value (the value
// itself is kept nowhere).
type sessions struct {
	mu  sync.Mutex
	exp map[[32]byte]time.Time
}

func newSessions() *sessions { return &sessions{exp: map[[32]byte]time.Time{}} }

// add makes a session and returns its cookie value.
func (s *sessions) add(now time.Time) string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported systems
	}
	v := base64.RawURLEncoding.EncodeToString(b[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, e := range s.exp {
		if now.After(e) {
			delete(s.exp, k)
		}
	}
	for len(s.exp) >= maxSessions {
		var oldest [32]byte
		var at time.Time
		for k, e := range s.exp {
			if at.IsZero() || e.Before(at) {
				oldest, at = k, e
			}
		}
		delete(s.exp, oldest)
	}
	s.exp[sha256.Sum256([]byte(v))] = now.Add(sessionLife)
	return v
}

// lookup returns the session's digest when value is a live session.
func (s *sessions) lookup(value string, now time.Time) ([32]byte, bool) {
	k := sha256.Sum256([]byte(value))
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.exp[k]
	if !ok || now.After(e) {
		delete(s.exp, k)
		return k, false
	}
	return k, true
}

func (s *sessions) remove(value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.exp, sha256.Sum256([]byte(value)))
}

// tokenOK compares a presented token with the console's in constant time
// (of the digests: the lengths leak nothing either).
func (s *Server) tokenOK(presented string) bool {
	p := sha256.Sum256([]byte(presented))
	return subtle.ConstantTimeCompare(p[:], s.tokenSum[:]) == 1
}

// identify returns who r is.
func (s *Server) identify(r *http.Request) ident {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if ok && strings.EqualFold(scheme, "Bearer") && s.tokenOK(strings.TrimSpace(tok)) {
			return "bearer"
		}
		return ""
	}
	c, err := r.Cookie(CookieName)
	if err != nil {
		return ""
	}
	k, ok := s.sessions.lookup(c.Value, s.now())
	if !ok {
		return ""
	}
	return ident("session:" + base64.RawURLEncoding.EncodeToString(k[:]))
}

// csrfToken is the CSRF token of who: an HMAC of its identity under the
// server's random key, so that it is worth nothing to anyone else and
// nothing after a restart.
func (s *Server) csrfToken(who ident) string {
	m := hmac.New(sha256.New, s.csrfKey[:])
	m.Write([]byte("csrf\x00"))
	m.Write([]byte(who))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// csrfOK checks the csrf form field of a POST against who's token.
func (s *Server) csrfOK(r *http.Request, who ident) bool {
	got := r.PostFormValue("csrf")
	want := s.csrfToken(who)
	return got != "" && hmac.Equal([]byte(got), []byte(want))
}

// sameOrigin refuses a POST that a browser says came from another site:
// the login form has no session yet to tie a CSRF token to, so it checks
// the browser's Sec-Fetch-Site and Origin headers instead.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return false
	}
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		_, host, ok := strings.Cut(o, "://")
		return ok && host == r.Host
	}
	return true
}
