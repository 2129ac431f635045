package rules

import (
	"encoding/json"
	"testing"

	"github.com/pgimageai/pgimageai/provider"
)

// TestVersionOf: what changes outputs makes a new version; pacing, cost,
// batching, the key's variable and the model row's name do not.
func TestVersionOf(t *testing.T) {
	prompt, other := "Describe.", "Describe briefly."
	base := provider.Model{Name: "m", Provider: "openai", BaseURL: "http://h/v1", Model: "gpt-4o-mini", APIKeyEnv: "K",
		Options: json.RawMessage(`{"detail":"low","max_concurrency":8}`)}
	with := func(f func(*provider.Model)) provider.Model { m := base; f(&m); return m }
	tests := []struct {
		name    string
		m       provider.Model
		prompt  *string
		newVers bool
	}{
		{name: "same", m: base, prompt: &prompt},
		{name: "pacing and cost", m: with(func(m *provider.Model) {
			m.Options = json.RawMessage(`{"max_concurrency":2,"detail":"low","requests_per_minute":60,"price_per_1m_input_tokens":0.15,"batch_api":true,"timeout":"5s","self_hosted":true,"adaptive_concurrency":false}`)
		}), prompt: &prompt},
		{name: "key variable and row name", m: with(func(m *provider.Model) { m.APIKeyEnv, m.Name = "OTHER", "m2" }), prompt: &prompt},
		{name: "options spacing", m: with(func(m *provider.Model) { m.Options = json.RawMessage(`{ "detail" : "low" }`) }), prompt: &prompt},
		{name: "model id", m: with(func(m *provider.Model) { m.Model = "gpt-4o" }), prompt: &prompt, newVers: true},
		{name: "provider", m: with(func(m *provider.Model) { m.Provider = "local" }), prompt: &prompt, newVers: true},
		{name: "base url", m: with(func(m *provider.Model) { m.BaseURL = "http://other/v1" }), prompt: &prompt, newVers: true},
		{name: "output option", m: with(func(m *provider.Model) { m.Options = json.RawMessage(`{"detail":"high"}`) }), prompt: &prompt, newVers: true},
		{name: "dimensions", m: with(func(m *provider.Model) { m.Options = json.RawMessage(`{"detail":"low","dimensions":256}`) }), prompt: &prompt, newVers: true},
		{name: "prompt", m: base, prompt: &other, newVers: true},
		{name: "no prompt", m: base, prompt: nil, newVers: true},
	}
	want, err := VersionOf(base, "AI_IMAGE_COMPLETE", &prompt)
	if err != nil {
		t.Fatal(err)
	}
	if len(want.ID) != 16 || string(want.Options) != `{"detail":"low"}` {
		t.Fatalf("version %+v: want a 16-hex id and only the output option", want)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := VersionOf(tc.m, "AI_IMAGE_COMPLETE", tc.prompt)
			if err != nil {
				t.Fatal(err)
			}
			if (got.ID != want.ID) != tc.newVers {
				t.Errorf("id %s vs %s: new version = %v, want %v", got.ID, want.ID, got.ID != want.ID, tc.newVers)
			}
		})
	}
	if _, err := VersionOf(with(func(m *provider.Model) { m.Options = json.RawMessage(`[1]`) }), "AI_IMAGE_EMBED", nil); err == nil {
		t.Error("options that are not an object: no error")
	}
}
