package provider

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseOptionsDefaults(t *testing.T) {
	for _, raw := range []string{"", "{}", "  "} {
		o, err := ParseOptions(json.RawMessage(raw))
		if err != nil {
			t.Fatalf("ParseOptions(%q): %v", raw, err)
		}
		if time.Duration(o.Timeout) != 60*time.Second || o.MaxRetries == nil || *o.MaxRetries != 4 ||
			o.MaxConcurrency != 64 || o.RequestsPerMinute != 0 || o.TokensPerMinute != 0 || o.MaxImageBytes != 20<<20 {
			t.Errorf("ParseOptions(%q) = %+v, want the the provider contract defaults", raw, o)
		}
		want := []string{"image/png", "image/jpeg", "image/gif", "image/webp"}
		if !reflect.DeepEqual(o.Formats, want) {
			t.Errorf("Formats = %v, want %v", o.Formats, want)
		}
	}
}

func TestParseOptions(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		check   func(Options) bool
		wantErr string
	}{
		{name: "timeout string", raw: `{"timeout":"30s"}`,
			check: func(o Options) bool { return time.Duration(o.Timeout) == 30*time.Second }},
		{name: "timeout seconds", raw: `{"timeout":1.5}`,
			check: func(o Options) bool { return time.Duration(o.Timeout) == 1500*time.Millisecond }},
		{name: "timeout compound", raw: `{"timeout":"1m30s"}`,
			check: func(o Options) bool { return time.Duration(o.Timeout) == 90*time.Second }},
		{name: "timeout bad string", raw: `{"timeout":"soon"}`, wantErr: `duration "soon"`},
		{name: "timeout bool", raw: `{"timeout":true}`, wantErr: "duration must be"},
		{name: "timeout negative", raw: `{"timeout":"-1s"}`, wantErr: "option timeout"},
		{name: "max_retries 0 kept", raw: `{"max_retries":0}`,
			check: func(o Options) bool { return *o.MaxRetries == 0 }},
		{name: "max_retries negative", raw: `{"max_retries":-1}`, wantErr: "option max_retries"},
		{name: "max_concurrency negative", raw: `{"max_concurrency":-2}`, wantErr: "option max_concurrency"},
		{name: "requests_per_minute", raw: `{"requests_per_minute":120}`,
			check: func(o Options) bool { return o.RequestsPerMinute == 120 }},
		{name: "formats subset", raw: `{"formats":["image/png"]}`,
			check: func(o Options) bool { return reflect.DeepEqual(o.Formats, []string{"image/png"}) }},
		{name: "formats unknown", raw: `{"formats":["image/bmp"]}`, wantErr: `"image/bmp"`},
		{name: "wrong type", raw: `{"max_concurrency":"8"}`, wantErr: "options:"},
		{name: "provider keys ignored", raw: `{"temperature":0,"detail":"low"}`,
			check: func(o Options) bool { return o.MaxConcurrency == DefaultMaxConcurrency }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := ParseOptions(json.RawMessage(tt.raw))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(o) {
				t.Fatalf("options = %+v", o)
			}
		})
	}
}

func TestDecodeStrict(t *testing.T) {
	type cfg struct {
		Options
		Detail string `json:"detail"`
	}
	tests := []struct {
		name    string
		raw     string
		wantErr string
	}{
		{name: "empty leaves defaults", raw: ""},
		{name: "shared and own keys", raw: `{"timeout":"5s","detail":"low"}`},
		{name: "unknown key named", raw: `{"temprature":0.2}`, wantErr: `"temprature"`},
		{name: "not an object", raw: `[1]`, wantErr: "options:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c cfg
			err := DecodeStrict(json.RawMessage(tt.raw), &c)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestDurationRoundTrip(t *testing.T) {
	b, err := json.Marshal(Duration(90 * time.Second))
	if err != nil || string(b) != `"1m30s"` {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
	var d Duration
	if err := json.Unmarshal(b, &d); err != nil || time.Duration(d) != 90*time.Second {
		t.Fatalf("Unmarshal = %v, %v", time.Duration(d), err)
	}
}
