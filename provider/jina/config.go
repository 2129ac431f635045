package jina

import (
	"encoding/json"
	"fmt"

	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/batch"
)

// DefaultBaseURL is used when models.base_url is NULL.
const DefaultBaseURL = "https://api.jina.ai/v1"

// Batch sizes: the default, and the most inputs Jina's embeddings endpoint
// accepts per request.
const (
	DefaultBatchSize = 32
	MaxBatchSize     = 2048
)

// Config is models.options for the jina provider: the shared keys of
// provider.Options, dimensions, batch_size and batch_wait. Unknown keys are
// an error, so that a misspelt option never goes unnoticed.
type Config struct {
	provider.Options
	batch.Config

	// Dimensions, when set, is the length every returned vector must have;
	// another length is a bad_response. 0 = not checked.
	Dimensions int `json:"dimensions,omitempty"`
}

// Validate reports the first invalid option.
func (c Config) Validate() error {
	if err := c.Options.Validate(); err != nil {
		return err
	}
	if err := c.Config.Validate(MaxBatchSize); err != nil {
		return err
	}
	if c.Dimensions < 0 {
		return fmt.Errorf("option dimensions: must be >= 1, got %d", c.Dimensions)
	}
	return nil
}

// ParseConfig decodes models.options strictly (an unknown key is an error
// naming it), validates it and applies the defaults.
func ParseConfig(raw json.RawMessage) (Config, error) {
	var c Config
	if err := provider.DecodeStrict(raw, &c); err != nil {
		return Config{}, err
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	c.Options = c.Options.WithDefaults()
	c.Config = c.Config.WithDefaults(DefaultBatchSize)
	return c, nil
}
