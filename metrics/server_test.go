package metrics

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// TestNewServerTimeouts: the server of the metrics endpoint has every
// timeout and a header bound; a zero one means "none" to net/http.
func TestNewServerTimeouts(t *testing.T) {
	srv := NewServer(http.NotFoundHandler(), DefaultTimeouts)
	for _, tt := range []struct {
		name string
		got  time.Duration
		want time.Duration
	}{
		{"ReadHeaderTimeout", srv.ReadHeaderTimeout, 5 * time.Second},
		{"ReadTimeout", srv.ReadTimeout, 10 * time.Second},
		{"WriteTimeout", srv.WriteTimeout, 30 * time.Second},
		{"IdleTimeout", srv.IdleTimeout, 60 * time.Second},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %s, want %s", tt.name, tt.got, tt.want)
		}
	}
	if srv.MaxHeaderBytes != 16<<10 {
		t.Errorf("MaxHeaderBytes = %d, want %d", srv.MaxHeaderBytes, 16<<10)
	}
}

// TestServerClosesSlowClients: a client that sends its headers or body a
// byte at a time (slowloris), keeps a connection idle, or never reads its
// answer is disconnected once its timeout passes, instead of holding a
// connection and a goroutine for as long as it likes. The first case runs
// with the endpoint's own timeouts; the others with short ones, Idle below
// Read so that each timeout is the one that acts.
func TestServerClosesSlowClients(t *testing.T) {
	short := Timeouts{ReadHeader: 300 * time.Millisecond, Read: 1500 * time.Millisecond,
		Write: 1500 * time.Millisecond, Idle: 300 * time.Millisecond, MaxHeaderBytes: 16 << 10}
	big := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		chunk := make([]byte, 1<<20)
		for range 256 { // 256 MiB: more than any socket buffer holds
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	tests := []struct {
		name     string
		timeouts Timeouts
		handler  http.Handler
		head     string        // sent at once
		trickle  bool          // then one byte every 100ms
		wait     time.Duration // before reading the answer
		within   time.Duration // the connection is closed by then
	}{
		{name: "headers a byte at a time, the endpoint's timeouts", timeouts: DefaultTimeouts,
			head: "GET /livez HTTP/1.1\r\nHost: x\r\nX-Slow: ", trickle: true, within: DefaultTimeouts.ReadHeader + 2*time.Second},
		{name: "headers a byte at a time", timeouts: short,
			head: "GET /livez HTTP/1.1\r\nHost: x\r\nX-Slow: ", trickle: true, within: short.ReadHeader + time.Second},
		{name: "a body a byte at a time", timeouts: short,
			head: "POST /livez HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n", trickle: true, within: short.Read + time.Second},
		{name: "an idle kept-alive connection", timeouts: short,
			head: "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n", within: short.Idle + time.Second},
		{name: "an answer never read", timeouts: short, handler: big,
			head: "GET /big HTTP/1.1\r\nHost: x\r\n\r\n", wait: short.Write + 500*time.Millisecond, within: short.Write + 3*time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := tt.handler
			if h == nil {
				h = New().Handler()
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv := NewServer(h, tt.timeouts)
			go srv.Serve(ln)
			t.Cleanup(func() { srv.Close() })

			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if tcp, ok := c.(*net.TCPConn); ok {
				tcp.SetReadBuffer(64 << 10) // the answer never read fills it soon
			}
			start := time.Now()
			if _, err := io.WriteString(c, tt.head); err != nil {
				t.Fatal(err)
			}
			if tt.trickle {
				go func() {
					for time.Since(start) < tt.within+time.Second {
						if _, err := c.Write([]byte("a")); err != nil {
							return
						}
						time.Sleep(100 * time.Millisecond)
					}
				}()
			}
			time.Sleep(tt.wait)
			c.SetReadDeadline(start.Add(tt.within))
			n, err := io.Copy(io.Discard, c)
			switch {
			case errors.Is(err, os.ErrDeadlineExceeded):
				t.Fatalf("the connection is open after %s (read %d bytes)", time.Since(start).Round(time.Millisecond), n)
			case err != nil && !isReset(err):
				t.Fatalf("read: %v", err)
			}
			if tt.handler != nil && n >= 256<<20 {
				t.Fatalf("the whole answer was written (%d bytes)", n)
			}
		})
	}
}

// isReset reports whether err is the peer resetting the connection: a
// server closing a socket with unread input sends RST, not FIN.
func isReset(err error) bool {
	return strings.Contains(err.Error(), "connection reset")
}
