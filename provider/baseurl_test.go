package provider

import (
	"strings"
	"testing"
)

func TestParseBaseURL(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		wantErr string // substring; "" = accepted
	}{
		{name: "http", raw: "http://127.0.0.1:11434/v1"},
		{name: "https", raw: "https://api.openai.com/v1"},
		{name: "upper-case scheme", raw: "HTTPS://API.example.com/v1"},
		{name: "trailing slash", raw: "http://h:8000/v1/"},
		{name: "IPv6 host", raw: "http://[::1]:8080/v1"},
		{name: "empty port", raw: "http://h:/v1"},
		{name: "empty", raw: "", wantErr: "empty"},
		{name: "file", raw: "file:///etc/passwd", wantErr: `scheme must be http or https, got "file"`},
		{name: "ftp", raw: "ftp://example.com/v1", wantErr: `got "ftp"`},
		{name: "gopher", raw: "gopher://example.com:70/", wantErr: `got "gopher"`},
		{name: "javascript", raw: "javascript:alert(1)", wantErr: `got "javascript"`},
		{name: "data", raw: "data:text/plain,hi", wantErr: `got "data"`},
		{name: "websocket", raw: "ws://h/v1", wantErr: `got "ws"`},
		{name: "unix socket", raw: "unix:///var/run/ollama.sock", wantErr: `got "unix"`},
		{name: "host and port without scheme", raw: "localhost:11434/v1", wantErr: `got "localhost"`},
		{name: "IP and port without scheme", raw: "127.0.0.1:11434/v1", wantErr: "not a valid URL"},
		{name: "host without scheme", raw: "api.openai.com/v1", wantErr: "no scheme"},
		{name: "scheme-relative", raw: "//api.openai.com/v1", wantErr: "no scheme"},
		{name: "path only", raw: "/v1", wantErr: "no scheme"},
		{name: "empty host", raw: "http://", wantErr: "no host"},
		{name: "empty host with path", raw: "http:///v1", wantErr: "no host"},
		{name: "port without host", raw: "http://:8080/v1", wantErr: "no host"},
		{name: "one slash", raw: "http:/h/v1", wantErr: "no host"},
		{name: "opaque http", raw: "http:h/v1", wantErr: "no host"},
		{name: "backslashes", raw: `http:\\h\v1`, wantErr: "no host"},
		{name: "query", raw: "https://gw.example.com/v1?api-version=1", wantErr: "query"},
		{name: "empty query", raw: "https://gw.example.com/v1?", wantErr: "query"},
		{name: "fragment", raw: "https://gw.example.com/v1#x", wantErr: "fragment"},
		{name: "empty fragment", raw: "https://gw.example.com/v1#", wantErr: "fragment"},
		{name: "port zero", raw: "http://h:0/v1", wantErr: "port 0"},
		{name: "port too large", raw: "http://h:99999/v1", wantErr: "port 99999"},
		{name: "port not a number", raw: "http://h:abc/v1", wantErr: "invalid port"},
		{name: "leading space", raw: " http://h/v1", wantErr: "spaces"},
		{name: "trailing space", raw: "http://h/v1 ", wantErr: "spaces"},
		{name: "newline", raw: "http://h/v1\n", wantErr: "control characters"},
		{name: "unparsable", raw: "http://[::1", wantErr: "not a valid URL"},
		{name: "user and password", raw: "http://user:hunter2@h/v1", wantErr: "must not contain credentials"},
		{name: "user only (a token)", raw: "https://hunter2@h/v1", wantErr: "must not contain credentials"},
		{name: "empty user information", raw: "http://@h/v1", wantErr: "must not contain credentials"},
		{name: "credentials on another scheme", raw: "ftp://user:hunter2@h/v1", wantErr: `got "ftp"`},
		{name: "credentials without scheme", raw: "user:hunter2@h/v1", wantErr: `got "user"`},
		{name: "password with a slash cut into a port", raw: "http://user:hunt/er2@h/v1", wantErr: "invalid port"},
		{name: "credentials and a bad port", raw: "http://u:hunter2@h:99999/v1", wantErr: "credentials"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := ParseBaseURL(tt.raw)
			if tt.wantErr == "" {
				if err != nil || u == nil {
					t.Fatalf("ParseBaseURL(%q) = %v, %v; want it accepted", tt.raw, u, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ParseBaseURL(%q) = %v; want an error containing %q", tt.raw, err, tt.wantErr)
			}
			for _, secret := range []string{"hunter2", "hunt"} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("error %q shows credentials (%q)", err, secret)
				}
			}
		})
	}
}
