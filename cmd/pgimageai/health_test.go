package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealthURL(t *testing.T) {
	tests := []struct {
		addr, want, wantErr string
	}{
		{":9187", "http://127.0.0.1:9187/readyz", ""},
		{"0.0.0.0:9187", "http://127.0.0.1:9187/readyz", ""},
		{"[::]:9187", "http://127.0.0.1:9187/readyz", ""},
		{"10.1.2.3:80", "http://10.1.2.3:80/readyz", ""},
		{"[::1]:9187", "http://[::1]:9187/readyz", ""},
		{":0", "", "no fixed port"},
		{"9187", "", "missing port"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			got, err := healthURL(tt.addr, "/readyz")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("healthURL(%q) = %q, %v; want error %q", tt.addr, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("healthURL(%q) = %q, %v; want %q", tt.addr, got, err, tt.want)
			}
		})
	}
}

func TestHealthCommand(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/readyz":
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"state":"disconnected"}`))
		case "/livez", "/healthz":
			w.Write([]byte(`{"state":"alive"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	// Another endpoint that redirects to the healthy one: a redirect is not followed.
	moved := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, srv.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer moved.Close()
	_, movedPort, _ := net.SplitHostPort(strings.TrimPrefix(moved.URL, "http://"))
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		wantCode int
		wantOut  string
	}{
		{"ready fails with 503", []string{"health", "--metrics-addr", ":" + port}, nil, exitFailure, `HTTP 503 {"state":"disconnected"}`},
		{"live", []string{"health", "--probe", "live"}, map[string]string{"PGIMAGEAI_METRICS_ADDR": ":" + port}, exitOK, `{"state":"alive"}`},
		{"leader", []string{"health", "--probe=leader", "--metrics-addr", "127.0.0.1:" + port}, nil, exitOK, `alive`},
		{"unknown probe", []string{"health", "--probe", "dead", "--metrics-addr", ":" + port}, nil, exitUsage, "--probe must be"},
		{"no address", []string{"health"}, nil, exitUsage, "needs --metrics-addr"},
		{"a redirect is a failed check", []string{"health", "--probe", "live", "--metrics-addr", "127.0.0.1:" + movedPort}, nil, exitFailure, "HTTP 307"},
		{"nothing listens", []string{"health", "--metrics-addr", "127.0.0.1:1"}, nil, exitFailure, "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tt.args, env(tt.env), &stdout, &stderr)
			if code != tt.wantCode || !strings.Contains(stdout.String()+stderr.String(), tt.wantOut) {
				t.Errorf("exit %d, output %q %q; want %d and %q", code, stdout.String(), stderr.String(), tt.wantCode, tt.wantOut)
			}
		})
	}
}
