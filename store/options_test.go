package store

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestParseOptions(t *testing.T) {
	tests := []struct {
		name, kind, raw string
		want            func(Options) bool
		err             string // a substring of the error; "" = none
	}{
		{"empty", "s3", ``, func(o Options) bool {
			return o.Timeout == DefaultTimeout && o.MaxConcurrency == DefaultMaxConcurrency && o.Retries == DefaultRetries && o.MaxBytes == 0
		}, ""},
		{"empty object", "http", `{}`, func(o Options) bool { return o.Timeout == DefaultTimeout }, ""},
		{"all s3", "s3", `{"max_bytes": 1048576, "timeout": "5s", "max_concurrency": 3, "retries": 0, "path_style": true}`, func(o Options) bool {
			return o.MaxBytes == 1<<20 && o.Timeout == 5*time.Second && o.MaxConcurrency == 3 && o.Retries == 0 && o.PathStyle
		}, ""},
		{"timeout in seconds", "file", `{"timeout": 2.5}`, func(o Options) bool { return o.Timeout == 2500*time.Millisecond }, ""},
		{"all http", "http", `{"allow_hosts": ["CDN.example.com", "*.img.example.com", "h:8443"], "allow_private": true, "allow_http": true}`, func(o Options) bool {
			return o.AllowPrivate && o.AllowHTTP && strings.Join(o.AllowHosts, ",") == "cdn.example.com,*.img.example.com,h:8443"
		}, ""},
		{"unknown, with a hint", "s3", `{"max_byte": 5}`, nil, `unknown option "max_byte" (did you mean "max_bytes"?)`},
		{"unknown, no hint", "s3", `{"colour": 5}`, nil, `unknown option "colour"; known:`},
		{"path_style on http", "http", `{"path_style": true}`, nil, `"path_style" applies only to s3 stores, not http`},
		{"allow_private on s3", "s3", `{"allow_private": true}`, nil, `applies only to http stores`},
		{"allow_http on file", "file", `{"allow_http": true}`, nil, `applies only to http stores`},
		{"not an object", "s3", `[1]`, nil, "not a JSON object"},
		{"max_bytes a string", "s3", `{"max_bytes": "1MB"}`, nil, "max_bytes: want an integer"},
		{"max_bytes fractional", "s3", `{"max_bytes": 1.5}`, nil, "max_bytes: want an integer"},
		{"max_bytes zero", "s3", `{"max_bytes": 0}`, nil, "max_bytes: 0 is out of range"},
		{"max_concurrency negative", "s3", `{"max_concurrency": -1}`, nil, "max_concurrency: -1 is out of range"},
		{"retries too many", "s3", `{"retries": 99}`, nil, "retries: 99 is out of range"},
		{"timeout nonsense", "s3", `{"timeout": "soon"}`, nil, `timeout: want a duration like "30s", got "soon"`},
		{"timeout too short", "s3", `{"timeout": "1ms"}`, nil, "timeout: 1ms is out of range"},
		{"path_style a string", "s3", `{"path_style": "yes"}`, nil, "path_style: want true or false"},
		{"allow_hosts a string", "http", `{"allow_hosts": "a.example.com"}`, nil, "allow_hosts: want an array"},
		{"allow_hosts a URL", "http", `{"allow_hosts": ["https://a.example.com/"]}`, nil, "is not a host name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseOptions(tt.kind, json.RawMessage(tt.raw))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error = %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("error = %v", err)
			}
			if !tt.want(o) {
				t.Errorf("options = %+v", o)
			}
		})
	}
}

func TestHostAllowed(t *testing.T) {
	allow := []string{"cdn.example.com", "*.img.example.com", "pinned.example.com:8443"}
	tests := []struct {
		host, port string
		want       bool
	}{
		{"cdn.example.com", "", true},
		{"CDN.Example.com", "443", true},
		{"a.img.example.com", "", true},
		{"img.example.com", "", false}, // "*." is subdomains only
		{"evilimg.example.com", "", false},
		{"pinned.example.com", "8443", true},
		{"pinned.example.com", "443", false},
		{"cdn.example.com.evil.com", "", false},
		{"example.com", "", false},
	}
	for _, tt := range tests {
		if got := hostAllowed(allow, tt.host, tt.port); got != tt.want {
			t.Errorf("hostAllowed(%q, %q) = %v, want %v", tt.host, tt.port, got, tt.want)
		}
	}
}

func TestEffectiveLimit(t *testing.T) {
	tests := []struct{ caller, store, want int64 }{
		{100, 0, 100},
		{100, 50, 50},
		{100, 500, 100},
		{0, 50, 50},
		{0, 0, DefaultMaxBytes},
		{-1, 0, DefaultMaxBytes},
	}
	for _, tt := range tests {
		if got := effectiveLimit(tt.caller, Options{MaxBytes: tt.store}); got != tt.want {
			t.Errorf("effectiveLimit(%d, %d) = %d, want %d", tt.caller, tt.store, got, tt.want)
		}
	}
}
