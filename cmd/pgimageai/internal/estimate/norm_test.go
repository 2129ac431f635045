package estimate

import (
	"encoding/json"
	"fmt"
	"image"
	"math"
	"testing"

	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/llamacpp"
	"github.com/pgimageai/pgimageai/provider/openai"
	"github.com/pgimageai/pgimageai/provider/voyage"
	"github.com/pgimageai/pgimageai/state"
)

// newProvider builds the provider of a model row, as cmd's registry does.
func newProvider(t *testing.T, m provider.Model) provider.Provider {
	t.Helper()
	env := func(string) (string, bool) { return "", false }
	var p provider.Provider
	var err error
	switch m.Provider {
	case "openai":
		p, err = openai.New(m, env)
	case "voyage":
		p, err = voyage.New(m, env)
	case "llamacpp":
		p, err = llamacpp.New(m, env)
	default:
		t.Fatalf("no provider %s", m.Provider)
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNormalizedTokens: a 12 MP photo's size, bytes and tokens with and
// without normalisation, by each provider's rule.
func TestNormalizedTokens(t *testing.T) {
	tests := []struct {
		name, prov, model, options string
		wantW, wantH               int
		wantStored, wantIn         float64 // input tokens an image, as stored and as sent; NaN: no rule
		wantSent                   string  // bytes sent, about; "" with normalisation off
	}{
		{"voyage", "voyage", "voyage-multimodal-3", `{}`, 1632, 1225, 21773, 3570, "491898"},
		{"openai high", "openai", "gpt-4o", `{"detail": "high"}`, 1024, 768, 765, 765, "193500"},
		{"voyage off", "voyage", "voyage-multimodal-3", `{"normalize": false}`, 4032, 3024, 21773, 21773, ""},
		{"llamacpp max side", "llamacpp", "tiny", `{"normalize_max_side": 1008}`, 1008, 756, math.NaN(), math.NaN(), "187500"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			scan := Scan{Rows: 1, Read: 1, WithImage: 1, Sizes: []image.Point{{4032, 3024}}, Bytes: []int64{3_000_000}}
			m := provider.Model{Name: "m", Provider: tc.prov, Model: tc.model, BaseURL: "http://127.0.0.1:8080/v1", Options: json.RawMessage(tc.options)}
			p := newProvider(t, m)
			opts, err := provider.ParseOptions(m.Options)
			if err != nil {
				t.Fatal(err)
			}
			n := Normalized(p, opts, scan)
			if n.Sizes[0] != image.Pt(tc.wantW, tc.wantH) {
				t.Fatalf("sent as %v, want %dx%d", n.Sizes[0], tc.wantW, tc.wantH)
			}
			if got := fmt.Sprintf("%.0f", n.SentBytes); n.Enabled != (tc.wantSent != "") || n.Enabled && got != tc.wantSent {
				t.Errorf("normalisation %v, %s bytes sent; want %q", n.Enabled, got, tc.wantSent)
			}
			r := Report{Rule: state.RuleListing{Function: "AI_IMAGE_EMBED"}, Model: m, Scan: scan, Norm: &n}
			r.Tokens(p, state.ModelUsage{}, 0)
			same := func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }
			if !same(n.StoredTokens, tc.wantStored) || !same(r.InputPerImage, tc.wantIn) {
				t.Errorf("tokens %v stored, %v sent; want %v, %v (%s)", n.StoredTokens, r.InputPerImage, tc.wantStored, tc.wantIn, r.TokenRule)
			}
		})
	}
}

// TestTokensWithoutRule: without a documented rule the model's usage
// tells, else nothing does; the output of a completion from usage, else
// max_tokens, else unknown; an embedding has none.
func TestTokensWithoutRule(t *testing.T) {
	m := provider.Model{Name: "m", Provider: "llamacpp", Model: "tiny", BaseURL: "http://127.0.0.1:8080/v1", Options: json.RawMessage(`{}`)}
	tests := []struct {
		name      string
		function  string
		usage     state.ModelUsage
		maxTokens int64
		wantIn    float64
		wantOut   float64
		wantFrom  string
	}{
		{"usage tells both", "AI_IMAGE_COMPLETE", state.ModelUsage{Calls: 4, PromptTokens: 1000, CompletionTokens: 200}, 500, 250, 50, "the average of pgimageai.usage"},
		{"max_tokens bounds the output", "AI_IMAGE_COMPLETE", state.ModelUsage{}, 500, math.NaN(), 500, "max_tokens, an upper bound"},
		{"nothing tells", "AI_IMAGE_COMPLETE", state.ModelUsage{}, 0, math.NaN(), math.NaN(), ""},
		{"an embedding has no output", "AI_IMAGE_EMBED", state.ModelUsage{Calls: 2, PromptTokens: 100}, 500, 50, 0, ""},
	}
	same := func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := Norm{}
			r := Report{Rule: state.RuleListing{Function: tc.function}, Model: m, Norm: &n}
			r.Tokens(newProvider(t, m), tc.usage, tc.maxTokens)
			if !same(r.InputPerImage, tc.wantIn) || !same(r.OutputPerCall, tc.wantOut) || r.OutputFrom != tc.wantFrom {
				t.Errorf("in %v, out %v from %q; want %v, %v from %q", r.InputPerImage, r.OutputPerCall, r.OutputFrom, tc.wantIn, tc.wantOut, tc.wantFrom)
			}
			if r.TokenRule == "" {
				t.Error("no word on where the tokens come from")
			}
		})
	}
}
