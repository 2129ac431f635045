package provider

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestOptionErrors(t *testing.T) {
	type own struct {
		Options
		Detail      string   `json:"detail"`
		Temperature *float64 `json:"temperature"`
	}
	tests := []struct {
		name, raw, want string
	}{
		{"unknown key, near one", `{"max_token": 5}`, `unknown option "max_token" (did you mean "max_tokens_per_day"?)`},
		{"unknown key, near an own one", `{"temprature": 0}`, `unknown option "temprature" (did you mean "temperature"?)`},
		{"unknown key lists the keys", `{"zzz": 1}`, "the options of this provider are adaptive_concurrency, "},
		{"a string for a number", `{"max_retries": "5"}`, "option max_retries must be a whole number, got a string"},
		{"a number for a string", `{"detail": 5}`, "option detail must be a string, got a number"},
		{"a fraction for a whole number", `{"max_concurrency": 1.5}`, "option max_concurrency must be a whole number, got a number"},
		{"not an object", `[1]`, "options must be a JSON object, got an array"},
		{"not JSON", `{"detail": }`, "options are not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v own
			err := DecodeStrict(json.RawMessage(tt.raw), &v)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "Go struct") || strings.Contains(err.Error(), "float64") || strings.Contains(err.Error(), "provider.") {
				t.Fatalf("err = %v names Go types", err)
			}
		})
	}
}

func TestUnknownProviderHint(t *testing.T) {
	r := NewRegistry()
	r.Register("openai", nil)
	r.Register("ollama", nil)
	_, err := r.New(Model{Name: "m", Provider: "olama", Model: "x"}, nil)
	if err == nil || !strings.Contains(err.Error(), `unknown provider "olama" (did you mean "ollama"?); the providers are ollama, openai`) {
		t.Fatalf("err = %v", err)
	}
}
