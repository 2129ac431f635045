package integration

import (
	"crypto/rand"
	"net/url"
	"testing"
	"time"
)

// Helpers that the integration suites (this package's own tests and
// integration_test's) share.

// WaitFor polls cond until it holds and returns how long that took; it fails
// tb when timeout passes first, naming what it waited for.
func WaitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) time.Duration {
	tb.Helper()
	t0 := time.Now()
	for !cond() {
		if time.Since(t0) > timeout {
			tb.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(t0)
}

// RandomBytes returns n random bytes.
func RandomBytes(tb testing.TB, n int) []byte {
	tb.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return b
}

// WithUser returns dsn connecting as user with password instead.
func WithUser(tb testing.TB, dsn, user, password string) string {
	tb.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	u.User = url.UserPassword(user, password)
	return u.String()
}
