package httpjson

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestBaseURL(t *testing.T) {
	tests := []struct {
		name, raw, def, want, wantErr string
	}{
		{name: "default", def: "https://api.example.com/v1", want: "https://api.example.com/v1"},
		{name: "required", wantErr: "required"},
		{name: "trailing slash", raw: "http://h:8000/v1/", want: "http://h:8000/v1"},
		{name: "scheme", raw: "ftp://h/v1", wantErr: "scheme"},
		{name: "no host", raw: "http:///v1", wantErr: "no host"},
		{name: "query", raw: "http://h/v1?x=1", wantErr: "query"},
		{name: "password not shown", raw: "ftp://u:pw-123@h", wantErr: "scheme"},
		{name: "credentials refused", raw: "http://u:pw-123@h/v1", wantErr: "must not contain credentials"},
		{name: "file", raw: "file:///etc/passwd", wantErr: "scheme"},
		{name: "empty host", raw: "http://", wantErr: "no host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := BaseURL(tt.raw, tt.def)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "pw-123") {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("BaseURL = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
	}{
		{"none", nil, 0},
		{"seconds", map[string]string{"Retry-After": "1"}, time.Second},
		{"seconds with spaces", map[string]string{"Retry-After": " 20 "}, 20 * time.Second},
		{"fractional seconds", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond},
		{"zero", map[string]string{"Retry-After": "0"}, 0},
		{"negative", map[string]string{"Retry-After": "-3"}, 0},
		{"NaN", map[string]string{"Retry-After": "NaN"}, 0},
		{"huge capped", map[string]string{"Retry-After": "1e300"}, 24 * time.Hour},
		{"http date", map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second},
		{"http date in the past", map[string]string{"Retry-After": now.Add(-time.Hour).Format(http.TimeFormat)}, 0},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0},
		{"retry-after-ms wins", map[string]string{"Retry-After-Ms": "250", "Retry-After": "1"}, 250 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			if got := ParseRetryAfter(h, now); got != tt.want {
				t.Fatalf("ParseRetryAfter = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBodyMessage(t *testing.T) {
	tests := []struct{ body, want string }{
		{`{"error":{"message":"bad image","type":"invalid_request_error"}}`, "bad image"},
		{`{"error":"model not found"}`, "model not found"},
		{`{"id":"x","message":"invalid api token"}`, "invalid api token"},
		{`{"detail":"Rate limit exceeded"}`, "Rate limit exceeded"},
		{`{"detail":[{"loc":["body","input"],"msg":"field required"}]}`, `[{"loc":["body","input"],"msg":"field required"}]`},
		{"<html>\n <b>Bad Gateway</b>\n</html>", "<html> <b>Bad Gateway</b> </html>"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := BodyMessage([]byte(tt.body)); got != tt.want {
			t.Errorf("BodyMessage(%s) = %q, want %q", tt.body, got, tt.want)
		}
	}
}
