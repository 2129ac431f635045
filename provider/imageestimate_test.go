package provider_test

import (
	"encoding/json"
	"testing"

	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/cohere"
	"github.com/pgimageai/pgimageai/provider/llamacpp"
	"github.com/pgimageai/pgimageai/provider/local"
	"github.com/pgimageai/pgimageai/provider/openai"
	"github.com/pgimageai/pgimageai/provider/voyage"
)

// newProvider builds the provider of a model row with the given options.
func newProvider(t testing.TB, name, model, options string) (provider.Provider, provider.Options) {
	t.Helper()
	m := provider.Model{Name: "m", Provider: name, Model: model, Options: json.RawMessage(options)}
	env := func(string) (string, bool) { return "", false }
	var p provider.Provider
	var err error
	switch name {
	case "openai":
		p, err = openai.New(m, env)
	case "voyage":
		p, err = voyage.New(m, env)
	case "cohere":
		p, err = cohere.New(m, env)
	case "llamacpp":
		m.BaseURL = "http://127.0.0.1:8080/v1" // a server of one's own: no default
		p, err = llamacpp.New(m, env)
	case "local":
		p, err = local.New(m, env)
	default:
		t.Fatalf("no provider %s", name)
	}
	if err != nil {
		t.Fatal(err)
	}
	o, err := provider.ParseOptions(m.Options)
	if err != nil {
		t.Fatal(err)
	}
	return p, o
}

// TestImageTokenRuleOf: the examples of OpenAI's "Calculating costs"
// (platform.openai.com/docs/guides/images-vision): 1024×1024 at high costs
// 765; 2048×4096 at high 1105; 4096×8192 at low 85; Voyage's token per 560
// pixels (docs.voyageai.com/docs/multimodal-embeddings).
func TestImageTokenRuleOf(t *testing.T) {
	tests := []struct {
		name                     string
		provider, model, options string
		w, h                     int
		want                     int64 // -1: no rule
	}{
		{"gpt-4o 1024x1024 high", "openai", "gpt-4o", `{"detail": "high"}`, 1024, 1024, 765},
		{"gpt-4o 2048x4096 high", "openai", "gpt-4o-2024-08-06", `{"detail": "high"}`, 2048, 4096, 1105},
		{"gpt-4o 4096x8192 low", "openai", "gpt-4o", `{"detail": "low"}`, 4096, 8192, 85},
		{"gpt-4o small image: one tile", "openai", "gpt-4o", `{"detail": "high"}`, 300, 200, 255},
		{"gpt-4o unset counts as high", "openai", "gpt-4o", `{}`, 1024, 1024, 765},
		{"gpt-4o-mini 1024x1024 high", "openai", "gpt-4o-mini", `{"detail": "high"}`, 1024, 1024, 2833 + 4*5667},
		{"openai model without a rule", "openai", "llava", `{"detail": "high"}`, 1024, 1024, -1},
		{"voyage 1 token per 560 px", "voyage", "voyage-multimodal-3", `{}`, 1000, 560, 1000},
		{"voyage rounds up", "voyage", "voyage-multimodal-3", `{}`, 1001, 560, 1001},
		{"voyage 12 MP", "voyage", "voyage-multimodal-3", `{}`, 4032, 3024, 21773},
		{"local has no rule", "local", "local", `{}`, 100, 100, -1},
		{"cohere has no rule", "cohere", "embed-v4.0", `{}`, 100, 100, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := newProvider(t, tt.provider, tt.model, tt.options)
			r, ok := provider.ImageTokenRuleOf(p)
			if tt.want < 0 {
				if ok {
					t.Fatalf("a rule %q, want none", r.Name)
				}
				return
			}
			if !ok {
				t.Fatal("no rule")
			}
			if r.Name == "" {
				t.Error("the rule has no name")
			}
			if got := r.Tokens(tt.w, tt.h); got != tt.want {
				t.Errorf("%d tokens, want %d (%s)", got, tt.want, r.Name)
			}
		})
	}
}

// TestSentSize: a 12 MP photo as each provider's size rule and the options'
// bounds send it.
func TestSentSize(t *testing.T) {
	tests := []struct {
		name, provider, model, options string
		wantW, wantH                   int
	}{
		{"voyage: 2,000,000 pixels", "voyage", "voyage-multimodal-3", `{}`, 1632, 1225},
		{"openai high: 2048 then short side 768", "openai", "gpt-4o", `{"detail": "high"}`, 1024, 768},
		{"openai low: 512", "openai", "gpt-4o", `{"detail": "low"}`, 512, 384},
		{"cohere: 2,458,624 pixels", "cohere", "embed-v4.0", `{}`, 1810, 1358},
		{"normalisation off: as stored", "voyage", "voyage-multimodal-3", `{"normalize": false}`, 4032, 3024},
		{"normalize_max_side", "llamacpp", "tiny", `{"normalize_max_side": 1008}`, 1008, 756},
		{"no rule of its own: MaxSide", "llamacpp", "tiny", `{}`, 2048, 1536},
		{"local: no bound", "local", "local", `{}`, 4032, 3024},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, o := newProvider(t, tt.provider, tt.model, tt.options)
			if w, h := o.SentSize(p, 4032, 3024); w != tt.wantW || h != tt.wantH {
				t.Errorf("sent as %dx%d, want %dx%d", w, h, tt.wantW, tt.wantH)
			}
		})
	}
}
