package httpjson

import (
	"encoding/json"
	"fmt"

	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/batch"
)

// EmbedConfig is models.options of a batching embedding provider (llamacpp,
// voyage, jina; cohere adds input_type): the shared keys of
// provider.Options, batch_size and batch_wait, and dimensions. Unknown keys
// are an error, so that a misspelt option never goes unnoticed.
type EmbedConfig struct {
	provider.Options
	batch.Config

	// Dimensions, when set, is the length every returned vector must have;
	// another length is a bad_response. 0 = not checked.
	Dimensions int `json:"dimensions,omitempty"`
}

// Validate reports the first invalid option; maxBatch is the most inputs the
// provider's endpoint accepts per request.
func (c EmbedConfig) Validate(maxBatch int) error {
	if err := c.Options.Validate(); err != nil {
		return err
	}
	if err := c.Config.Validate(maxBatch); err != nil {
		return err
	}
	if c.Dimensions < 0 || c.Dimensions > provider.MaxDimensions {
		return fmt.Errorf("option dimensions: must be between 1 and %d, got %d", provider.MaxDimensions, c.Dimensions)
	}
	return nil
}

// AnswerBytes is the most bytes an answer to one request may have: a full
// batch of vectors of dimensions values (provider.MaxDimensions when not
// set), as JSON.
func (c EmbedConfig) AnswerBytes() int64 {
	return provider.EmbedAnswerBytes(c.BatchSize, c.Dimensions)
}

// WithDefaults fills in the defaults of the shared options and defaultBatch
// as batch_size.
func (c EmbedConfig) WithDefaults(defaultBatch int) EmbedConfig {
	c.Options = c.Options.WithDefaults()
	c.Config = c.Config.WithDefaults(defaultBatch)
	return c
}

// ParseEmbedConfig decodes models.options strictly (an unknown key is an
// error naming it), validates them against maxBatch and applies the
// defaults, defaultBatch as batch_size. A provider with options of its own
// embeds EmbedConfig and does the same steps itself (see cohere).
func ParseEmbedConfig(raw json.RawMessage, defaultBatch, maxBatch int) (EmbedConfig, error) {
	var c EmbedConfig
	if err := provider.DecodeStrict(raw, &c); err != nil {
		return EmbedConfig{}, err
	}
	if err := c.Validate(maxBatch); err != nil {
		return EmbedConfig{}, err
	}
	return c.WithDefaults(defaultBatch), nil
}
