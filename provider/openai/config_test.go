package openai

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/provider"
)

func TestNewRejects(t *testing.T) {
	tests := []struct {
		name    string
		baseURL string
		model   string
		keyEnv  string
		options string
		wantErr string
	}{
		{name: "unknown option named", options: `{"temprature":0.2}`, wantErr: `unknown option "temprature" (did you mean "temperature"?)`},
		{name: "ftp scheme", baseURL: "ftp://example.com/v1", wantErr: `scheme must be http or https, got "ftp"`},
		{name: "file scheme", baseURL: "file:///etc/passwd", wantErr: `scheme must be http or https, got "file"`},
		{name: "no scheme", baseURL: "localhost:11434/v1", wantErr: "scheme must be http or https"},
		{name: "no host", baseURL: "http:///v1", wantErr: "no host"},
		{name: "query", baseURL: "https://gw.example.com/v1?api-version=1", wantErr: "query"},
		{name: "unparsable", baseURL: "http://[::1", wantErr: "not a valid URL"},
		{name: "password not shown", baseURL: "gopher://user:hunter2@example.com/", wantErr: `got "gopher"`},
		{name: "credentials refused", baseURL: "http://user:hunter2@example.com/v1", wantErr: "must not contain credentials"},
		{name: "javascript", baseURL: "javascript:alert(1)", wantErr: `got "javascript"`},
		{name: "empty host", baseURL: "http://", wantErr: "no host"},
		{name: "key variable unset", keyEnv: "MISSING_KEY", wantErr: "environment variable MISSING_KEY is not set"},
		{name: "key variable empty", keyEnv: "EMPTY_KEY", wantErr: "environment variable EMPTY_KEY is empty"},
		{name: "empty model id", model: " ", wantErr: "model id is empty"},
		{name: "bad detail", options: `{"detail":"medium"}`, wantErr: "option detail"},
		{name: "temperature too high", options: `{"temperature":2.5}`, wantErr: "option temperature"},
		{name: "top_p negative", options: `{"top_p":-0.1}`, wantErr: "option top_p"},
		{name: "max_tokens zero", options: `{"max_tokens":0}`, wantErr: "option max_tokens"},
		{name: "shared option invalid", options: `{"timeout":"never"}`, wantErr: "duration"},
		{name: "response_format not an object", options: `{"response_format":"json"}`, wantErr: "option response_format"},
		{name: "options not an object", options: `[]`, wantErr: "options:"},
	}
	env := mapEnv(map[string]string{"EMPTY_KEY": ""})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := testModel(tt.baseURL, tt.options)
			m.APIKeyEnv = tt.keyEnv
			if tt.model != "" {
				m.Model = tt.model
			}
			p, err := New(m, env)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New = %v, %v; want an error containing %q", p, err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("password leaked: %v", err)
			}
		})
	}
}

func TestNewDefaults(t *testing.T) {
	p, err := New(testModel("", ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	o := p.Options()
	if p.timeout != 60*time.Second || *o.MaxRetries != 4 || o.MaxConcurrency != 64 || p.gov.Limit() != 64 || p.server != nil || o.MaxImageBytes != 20<<20 ||
		p.retrier.MaxRetries != 4 || len(o.Formats) != 4 {
		t.Fatalf("defaults: timeout %v, options %+v, retries %d", p.timeout, o, p.retrier.MaxRetries)
	}
	if p.cfg.Temperature != nil || p.cfg.TopP != nil || p.cfg.MaxTokens != nil || p.cfg.Detail != "" {
		t.Fatalf("unset parameters should stay unset: %+v", p.cfg)
	}
	if base, _ := parseBaseURL(""); base != "https://api.openai.com/v1" {
		t.Fatalf("default base URL = %q", base)
	}
}

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig(json.RawMessage(`{"timeout":1.5,"max_retries":0,"temperature":0,"max_tokens":50,"detail":"low","system_prompt":"s","formats":["image/png"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if time.Duration(c.Timeout) != 1500*time.Millisecond || *c.MaxRetries != 0 || c.Temperature == nil || *c.Temperature != 0 ||
		*c.MaxTokens != 50 || c.Detail != "low" || c.SystemPrompt != "s" || len(c.Formats) != 1 {
		t.Fatalf("ParseConfig = %+v", c)
	}
}

func TestFactoryCapabilities(t *testing.T) {
	r := provider.NewRegistry()
	r.Register("openai", Factory)
	p, err := r.New(provider.Model{Name: "m", Provider: "openai", Model: "llava"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.(provider.TextGenerator); !ok {
		t.Error("openai provider is not a TextGenerator")
	}
	if _, ok := p.(provider.Embedder); ok {
		t.Error("openai provider must not implement Embedder")
	}

	p, err = r.New(provider.Model{Name: "m", Provider: "openai", Model: "llava", BaseURL: "ftp://x"}, nil)
	if err == nil || p != nil {
		t.Fatalf("Factory = %v, %v; want a nil provider and an error", p, err)
	}
	if !strings.Contains(err.Error(), `model "m"`) {
		t.Errorf("err = %v, want the model name", err)
	}
}
