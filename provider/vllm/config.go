package vllm

import (
	"encoding/json"
	"fmt"

	"github.com/pgimageai/pgimageai/provider"
)

// Config is models.options for the vllm provider: the shared keys of
// provider.Options plus dimensions and text. Unknown keys are an error, so
// that a misspelt option never goes unnoticed.
type Config struct {
	provider.Options

	// Dimensions, when set, is sent as dimensions (Matryoshka models) and is
	// the length every returned vector must have; another length is a
	// bad_response. 0 = neither.
	Dimensions int `json:"dimensions,omitempty"`
	// Text, when set, is a text part after the image: VLM2Vec-style models
	// expect one ("Represent the given image.").
	Text string `json:"text,omitempty"`
}

// Validate reports the first invalid option.
func (c Config) Validate() error {
	if err := c.Options.Validate(); err != nil {
		return err
	}
	if c.Dimensions < 0 || c.Dimensions > provider.MaxDimensions {
		return fmt.Errorf("option dimensions: must be between 1 and %d, got %d", provider.MaxDimensions, c.Dimensions)
	}
	return nil
}

// ParseConfig decodes models.options strictly (an unknown key is an error
// naming it), validates it and applies the shared defaults.
func ParseConfig(raw json.RawMessage) (Config, error) {
	c, err := provider.DecodeConfig[Config](raw)
	if err != nil {
		return Config{}, err
	}
	c.Options = c.Options.WithDefaults().SelfHostedOr(true) // a vLLM server is the operator's
	return c, nil
}
