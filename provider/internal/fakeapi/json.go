package fakeapi

import (
	"encoding/json"
	"reflect"
	"testing"
)

// Slice, Map and String walk decoded JSON, yielding zero values on a
// mismatch.
func Slice(v any) []any        { s, _ := v.([]any); return s }
func Map(v any) map[string]any { m, _ := v.(map[string]any); return m }
func String(v any) string      { s, _ := v.(string); return s }

// EqualJSON fails t unless the decoded body equals want as JSON structures
// (key presence matters, key order does not).
func EqualJSON(t testing.TB, got map[string]any, raw []byte, want string) {
	t.Helper()
	var w map[string]any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want: %v", err)
	}
	if !reflect.DeepEqual(got, w) {
		t.Fatalf("body = %s\nwant %s", raw, want)
	}
}

// OpenAIEcho is an OpenAI-style embeddings answer for vecs.
func OpenAIEcho(vecs [][]float32, tokens int) string {
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	a := struct {
		Object string         `json:"object"`
		Data   []item         `json:"data"`
		Usage  map[string]int `json:"usage"`
	}{Object: "list", Data: []item{}, Usage: map[string]int{"prompt_tokens": tokens, "total_tokens": tokens}}
	for i, v := range vecs {
		a.Data = append(a.Data, item{Object: "embedding", Index: i, Embedding: v})
	}
	b, _ := json.Marshal(a)
	return string(b)
}
