package main

import (
	"encoding/json"
	"image"
	"strings"
	"testing"

	"github.com/pgimageai/pgimageai/cmd/pgimageai/internal/render"
	"github.com/pgimageai/pgimageai/provider"
)

// TestEstimateNormalized: a 12 MP photo's bytes and tokens with and
// without normalisation, by each provider's rule.
func TestEstimateNormalized(t *testing.T) {
	tests := []struct {
		name, prov, model, options string
		wantW, wantH               int
		wantStored, wantIn         float64 // input tokens an image, as stored and as sent
		has                        string
	}{
		{"voyage", "voyage", "voyage-multimodal-3", `{}`, 1632, 1225, 21773, 3570, "about 491898"},
		{"openai high", "openai", "gpt-4o", `{"detail": "high"}`, 1024, 768, 765, 765, "about 193500"},
		{"voyage off", "voyage", "voyage-multimodal-3", `{"normalize": false}`, 4032, 3024, 21773, 21773, "off"},
		{"llamacpp max side", "llamacpp", "tiny", `{"normalize_max_side": 1008}`, 1008, 756, 0, 0, "about 187500"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			scan := render.ImageScan{Rows: 1, Read: 1, WithImage: 1, Sizes: []image.Point{{4032, 3024}}, Bytes: []int64{3_000_000}}
			m := provider.Model{Name: "m", Provider: tc.prov, Model: tc.model, BaseURL: "http://127.0.0.1:8080/v1", Options: json.RawMessage(tc.options)}
			p, err := registry(nil).New(m, func(string) (string, bool) { return "", false })
			if err != nil {
				t.Fatal(err)
			}
			opts, err := provider.ParseOptions(m.Options)
			if err != nil {
				t.Fatal(err)
			}
			n := normalizedSizes(p, opts, &scan)
			if n.Sizes[0] != image.Pt(tc.wantW, tc.wantH) {
				t.Fatalf("sent as %v, want %dx%d", n.Sizes[0], tc.wantW, tc.wantH)
			}
			if tr, ok := provider.ImageTokenRuleOf(p); ok {
				if got := float64(tr.Tokens(4032, 3024)); got != tc.wantStored {
					t.Errorf("stored tokens %v, want %v", got, tc.wantStored)
				}
				if got := float64(tr.Tokens(n.Sizes[0].X, n.Sizes[0].Y)); got != tc.wantIn {
					t.Errorf("sent tokens %v, want %v", got, tc.wantIn)
				}
			}
			if s := n.String(); !strings.Contains(s, tc.has) {
				t.Errorf("%q lacks %q", s, tc.has)
			}
		})
	}
}
