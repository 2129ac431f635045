package local

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/provider"
)

func TestNewRejects(t *testing.T) {
	tests := []struct {
		name    string
		options string
		wantErr string
	}{
		{name: "unknown option named", options: `{"dimensions":64}`, wantErr: `unknown option "dimensions"`},
		{name: "openai option", options: `{"temperature":0}`, wantErr: `unknown option "temperature"`},
		{name: "max_pixels negative", options: `{"max_pixels":-1}`, wantErr: "option max_pixels"},
		{name: "shared option invalid", options: `{"max_concurrency":-2}`, wantErr: "option max_concurrency"},
		{name: "bad duration", options: `{"timeout":"soon"}`, wantErr: "duration"},
		{name: "not an object", options: `[]`, wantErr: "options:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(provider.Model{Name: "m", Provider: "local", Options: json.RawMessage(tt.options)}, nil)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New = %v, %v; want an error containing %q", p, err, tt.wantErr)
			}
		})
	}
}

func TestNewDefaults(t *testing.T) {
	// Base URL, key variable and model id are ignored: none is an error.
	m := provider.Model{Name: "m", Provider: "local", BaseURL: "ftp://ignored", APIKeyEnv: "UNSET_VARIABLE", Model: ""}
	p, err := New(m, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	c := p.Config()
	want := min(provider.DefaultMaxConcurrency, runtime.GOMAXPROCS(0))
	if p.timeout != provider.DefaultTimeout || c.MaxConcurrency != want || c.MaxPixels != DefaultMaxPixels ||
		len(c.Formats) != 4 || c.MaxImageBytes != provider.DefaultMaxImageBytes {
		t.Fatalf("defaults: timeout %v, config %+v", p.timeout, c)
	}
	if p.Options().MaxConcurrency != want {
		t.Fatalf("Options().MaxConcurrency = %d, want %d", p.Options().MaxConcurrency, want)
	}
}

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig(json.RawMessage(`{"timeout":"5s","max_concurrency":32,"max_pixels":1000000,"formats":["image/webp"],"max_retries":0}`))
	if err != nil {
		t.Fatal(err)
	}
	if time.Duration(c.Timeout) != 5*time.Second || c.MaxConcurrency != 32 || c.MaxPixels != 1_000_000 ||
		len(c.Formats) != 1 || *c.MaxRetries != 0 {
		t.Fatalf("config %+v", c)
	}
}

func TestFactoryRegisters(t *testing.T) {
	reg := provider.NewRegistry()
	reg.Register("local", Factory)
	p, err := reg.New(provider.Model{Name: "demo", Provider: "local", Model: "anything at all"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.(provider.TextGenerator); !ok {
		t.Error("not a TextGenerator")
	}
	if _, ok := p.(provider.Embedder); !ok {
		t.Error("not an Embedder")
	}
	if p, err := reg.New(provider.Model{Name: "bad", Provider: "local", Options: json.RawMessage(`{"x":1}`)}, nil); err == nil || p != nil {
		t.Fatalf("bad options: %v, %v; want a nil provider and an error", p, err)
	}
}
