package store

import (
	"context"
	"net"
	"net/http"
	"os"
	"time"
)

func (e Env) getenv() func(string) string {
	if e.Getenv != nil {
		return e.Getenv
	}
	return os.Getenv
}

func (e Env) dial() func(ctx context.Context, network, addr string) (net.Conn, error) {
	if e.Dial != nil {
		return e.Dial
	}
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return d.DialContext
}

// newStoreHTTPClient is the HTTP client of a store: no proxy from the
// environment (a store's address is the one configured), no redirects unless
// checkRedirect allows them, connections sized to max_concurrency, and
// dialContext (nil = Env's dialer) for every connection.
func newStoreHTTPClient(env Env, o Options, dialContext func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Client {
	if dialContext == nil {
		dialContext = env.dial()
	}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          o.MaxConcurrency * 2,
		MaxIdleConnsPerHost:   o.MaxConcurrency,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: o.Timeout,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true, // sizes are the object's, not a gzip stream's
	}
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
