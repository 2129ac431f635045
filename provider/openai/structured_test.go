package openai

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/pgimageai/pgimageai/provider"
)

func TestStructuredOutput(t *testing.T) {
	schema := `{"type":"object","properties":{"label":{"type":"string"},"count":{"type":"integer"}},"required":["label","count"]}`
	body := func(content string) string {
		c, _ := json.Marshal(content)
		return `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":` +
			string(c) + `},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":7}}`
	}
	long := strings.Repeat("x", 300)
	tests := []struct {
		name      string
		content   string
		wantErr   string
		wantKind  provider.Kind
		wantShort bool // the message holds the first 200 characters only
	}{
		{"valid", `{"label":"cat","count":2}`, "", 0, false},
		{"not json", "A cat sitting " + long, "not valid JSON: A cat sitting", provider.BadResponse, true},
		{"missing required key", `{"label":"cat"}`, `lacks the required key "count"`, provider.BadResponse, false},
		{"not an object", `["cat"]`, "not a JSON object", provider.BadResponse, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeServer(t, answer{status: 200, body: body(tc.content)})
			p, _ := newTestProvider(t, testModel(srv.URL, `{"response_format":`+schema+`}`), nil)
			c, err := p.GenerateText(context.Background(), pngImage, "count the animals")
			got := srv.requests()[0].body.(map[string]any)["response_format"].(map[string]any)
			if got["type"] != "json_schema" {
				t.Fatalf("response_format sent: %v", got)
			}
			if tc.wantErr == "" {
				if err != nil || c.Text != tc.content {
					t.Fatalf("GenerateText = %q, %v", c.Text, err)
				}
				return
			}
			var pe *provider.Error
			if !errors.As(err, &pe) || pe.Kind != tc.wantKind || !strings.Contains(pe.Message, tc.wantErr) {
				t.Fatalf("err = %v, want %s containing %q", err, tc.wantKind, tc.wantErr)
			}
			if tc.wantShort && (strings.Contains(pe.Message, long) || !strings.Contains(pe.Message, long[:150])) {
				t.Fatalf("message should hold the first 200 characters: %q", pe.Message)
			}
			if len(srv.requests()) != 1 {
				t.Fatalf("a bad response was retried: %d requests", len(srv.requests()))
			}
		})
	}
}

// TestStructuredOutputKeyCut: a structured answer that is not JSON is quoted
// up to 200 characters; a key the server echoes across that cut must not
// leave its first characters behind.
func TestStructuredOutputKeyCut(t *testing.T) {
	const key = "sk-secret-0123456789abcdef"
	schema := `{"type":"object"}`
	content, _ := json.Marshal(strings.Repeat("x", 180) + " {{auth}}")
	srv := newFakeServer(t, answer{status: 200, body: `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":` +
		string(content) + `},"finish_reason":"stop"}]}`})
	m := testModel(srv.URL, `{"response_format":`+schema+`}`)
	m.APIKeyEnv = "KEY"
	p, _ := newTestProvider(t, m, map[string]string{"KEY": key})
	_, err := p.GenerateText(context.Background(), pngImage, "x")
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Kind != provider.BadResponse {
		t.Fatalf("err = %v, want a bad response", err)
	}
	if r := srv.requests(); len(r) != 1 || r[0].auth != "Bearer "+key {
		t.Fatalf("the server did not see the key: %+v", r)
	}
	if strings.Contains(pe.Message, key[:9]) || !strings.Contains(pe.Message, "xxxx") {
		t.Fatalf("message %q shows the start of the key", pe.Message)
	}
}
