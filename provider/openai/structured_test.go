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
