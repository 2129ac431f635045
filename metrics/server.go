package metrics

import (
	"net/http"
	"time"
)

// Timeouts bound what one client of the metrics endpoint can hold: a
// scraper, a probe, or anyone who can reach the port. Without them a client
// that sends its headers a byte at a time (slowloris), or opens connections
// and never reads the answer, keeps a goroutine and a socket each for ever.
type Timeouts struct {
	ReadHeader time.Duration // the request line and headers
	Read       time.Duration // the whole request; the endpoints take no body
	Write      time.Duration // from the end of the headers to the end of the answer
	Idle       time.Duration // a kept-alive connection between requests
	// MaxHeaderBytes bounds the request line and headers.
	MaxHeaderBytes int
}

// DefaultTimeouts are the metrics endpoint's: a scrape of /metrics reads the
// slot's state from PostgreSQL, well within Write; Prometheus's scrape
// timeout is 10s by default, a Kubernetes probe's 1s.
var DefaultTimeouts = Timeouts{
	ReadHeader:     5 * time.Second,
	Read:           10 * time.Second,
	Write:          30 * time.Second,
	Idle:           60 * time.Second,
	MaxHeaderBytes: 16 << 10,
}

// NewServer returns the HTTP server of the metrics endpoint serving h (see
// Handler) under t.
func NewServer(h http.Handler, t Timeouts) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    t.MaxHeaderBytes,
	}
}
