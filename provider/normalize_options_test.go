package provider_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/cohere"
	"github.com/pgimageai/pgimageai/provider/jina"
	"github.com/pgimageai/pgimageai/provider/llamacpp"
	"github.com/pgimageai/pgimageai/provider/local"
	"github.com/pgimageai/pgimageai/provider/openai"
	"github.com/pgimageai/pgimageai/provider/vllm"
	"github.com/pgimageai/pgimageai/provider/voyage"
)

// TestNormalizeOptionsEveryProvider: every provider's strict option parser
// takes the normalisation options (they are shared keys), and refuses a bad
// value of one.
func TestNormalizeOptionsEveryProvider(t *testing.T) {
	parsers := map[string]func(json.RawMessage) error{
		"openai":   func(r json.RawMessage) error { _, err := openai.ParseConfig(r); return err },
		"local":    func(r json.RawMessage) error { _, err := local.ParseConfig(r); return err },
		"llamacpp": func(r json.RawMessage) error { _, err := llamacpp.ParseConfig(r); return err },
		"vllm":     func(r json.RawMessage) error { _, err := vllm.ParseConfig(r); return err },
		"voyage":   func(r json.RawMessage) error { _, err := voyage.ParseConfig(r); return err },
		"cohere":   func(r json.RawMessage) error { _, err := cohere.ParseConfig(r); return err },
		"jina":     func(r json.RawMessage) error { _, err := jina.ParseConfig(r); return err },
	}
	good := `{"normalize": false, "normalize_max_side": 1024, "normalize_max_pixels": 1000000, "jpeg_quality": 80, "normalize_max_decoded_bytes": 1000000}`
	bad := map[string]string{
		`{"jpeg_quality": 101}`:               "jpeg_quality",
		`{"normalize_max_side": -1}`:          "normalize_max_side",
		`{"normalize_max_pixels": -1}`:        "normalize_max_pixels",
		`{"normalize": "yes"}`:                "normalize",
		`{"normalize_max_decoded_bytes": -5}`: "normalize_max_decoded_bytes",
	}
	for name, parse := range parsers {
		t.Run(name, func(t *testing.T) {
			if err := parse(json.RawMessage(good)); err != nil {
				t.Fatalf("%s: %v", good, err)
			}
			for raw, want := range bad {
				if err := parse(json.RawMessage(raw)); err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("%s: err %v, want one naming %s", raw, err, want)
				}
			}
		})
	}
	o, err := provider.ParseOptions(json.RawMessage(good))
	if err != nil || o.Normalization(nil).Enabled || o.Normalization(nil).Size.MaxSide != 1024 || o.Normalization(nil).Size.MaxPixels != 1000000 {
		t.Fatalf("ParseOptions(%s) = %+v, %v", good, o.NormalizeOptions, err)
	}
}
