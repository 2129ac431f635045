package fakeapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// HugeAnswer is the size of the answers a StreamServer sends: the 600 MB
// answer.
const HugeAnswer = 600 << 20

// StreamServer answers every request with status and a body of prefix
// followed by fill repeated up to size bytes, written as it goes, never held
// whole in memory. Requests counts the requests, Written the body bytes the
// server managed to write before the client stopped reading (hung up).
type StreamServer struct {
	*httptest.Server
	Requests atomic.Int64
	Written  atomic.Int64
}

// NewStreamServer starts a StreamServer.
func NewStreamServer(t testing.TB, status int, prefix, fill string, size int64) *StreamServer {
	t.Helper()
	s := &StreamServer{}
	chunk := strings.Repeat(fill, max(1, (32<<10)/len(fill)))
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet { // a self-hosted server's queue signal (openai's server.go): none here
			http.NotFound(w, r)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		s.Requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		n, err := io.WriteString(w, prefix)
		s.Written.Add(int64(n))
		for total := int64(n); err == nil && total < size; total += int64(n) {
			n, err = io.WriteString(w, chunk[:min(int64(len(chunk)), size-total)])
			s.Written.Add(int64(n))
		}
	}))
	t.Cleanup(s.Close)
	return s
}
