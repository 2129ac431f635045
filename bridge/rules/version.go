package rules

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/pgimageai/pgimageai/provider"
)

// Version describes what changes a rule's results: its function, the
// provider, its base URL, the provider's model id, the options that change
// outputs and the prompt. Two rules (or one rule before and after a change)
// with equal versions compute the same results; a new ID means a re-run —
// in place, or on the side and switched (see Switching).
type Version struct {
	ID       string
	Function string
	Model    string // models.name: recorded, not part of ID (a renamed copy computes the same)
	Provider string
	BaseURL  string
	ModelID  string          // models.model
	Options  json.RawMessage // the output-changing options, keys sorted
	Prompt   *string
}

// pacingOptions are the model options that change how and when a model is
// called, what it may cost or how its backfill is sent, never what it
// answers: changing them is no new version.
var pacingOptions = map[string]bool{
	"timeout": true, "max_retries": true, "max_concurrency": true, "requests_per_minute": true,
	"tokens_per_minute": true, "adaptive_concurrency": true, "self_hosted": true, "max_calls_per_day": true,
	"max_tokens_per_day": true, "price_per_1m_input_tokens": true, "price_per_1m_output_tokens": true,
	"batch_api": true, "batch_max_bytes": true, "batch_max_requests": true, "batch_poll_interval": true,
	"batch_size": true, "batch_wait": true, "max_image_bytes": true, "max_decoded_bytes": true,
	"max_jpeg_scans": true, "normalize_max_jpeg_scans": true, "normalize_decode_timeout": true,
}

// VersionOf returns the version of function with prompt on model m.
func VersionOf(m provider.Model, function string, prompt *string) (Version, error) {
	var all map[string]json.RawMessage
	if len(m.Options) > 0 {
		if err := json.Unmarshal(m.Options, &all); err != nil {
			return Version{}, fmt.Errorf("model %q: options: %w", m.Name, err)
		}
	}
	out := map[string]json.RawMessage{}
	for k, v := range all {
		if !pacingOptions[k] {
			out[k] = v
		}
	}
	opts, err := json.Marshal(out) // map keys sorted
	if err != nil {
		return Version{}, fmt.Errorf("model %q: options: %w", m.Name, err)
	}
	if opts, err = canonical(opts); err != nil {
		return Version{}, fmt.Errorf("model %q: options: %w", m.Name, err)
	}
	v := Version{Function: function, Model: m.Name, Provider: m.Provider, BaseURL: m.BaseURL, ModelID: m.Model, Options: opts, Prompt: prompt}
	h := sha256.New()
	p := "\x00" // no prompt, unlike an empty one
	if prompt != nil {
		p = "\x01" + *prompt
	}
	for _, s := range []string{function, m.Provider, m.BaseURL, m.Model, string(opts), p} {
		fmt.Fprintf(h, "%d:%s;", len(s), s)
	}
	v.ID = hex.EncodeToString(h.Sum(nil)[:8])
	return v, nil
}

// canonical re-encodes JSON with every object's keys sorted and no
// insignificant space, so that equal options give equal bytes however
// they were written.
func canonical(b []byte) ([]byte, error) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
