package cohere

import (
	"encoding/json"
	"fmt"

	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/httpjson"
)

// DefaultBaseURL is used when models.base_url is NULL.
const DefaultBaseURL = "https://api.cohere.com"

// DefaultInputType is sent as input_type unless the option sets another:
// stored images are the documents searched.
const DefaultInputType = "search_document"

// Batch sizes: the default, and the most inputs /v2/embed accepts per
// request.
const (
	DefaultBatchSize = 32
	MaxBatchSize     = 96
)

// Config is models.options for the cohere provider: those of
// httpjson.EmbedConfig and input_type. Unknown keys are an error, so that a
// misspelt option never goes unnoticed. Dimensions, when set, is also sent
// as output_dimension (embed-v4 and later accept 256, 512, 1024 and 1536).
type Config struct {
	httpjson.EmbedConfig

	// InputType is sent as input_type, which Cohere requires for v3 and
	// later models: search_document (default), search_query,
	// classification, clustering or image.
	InputType string `json:"input_type,omitempty"`
}

// Validate reports the first invalid option.
func (c Config) Validate() error {
	if err := c.EmbedConfig.Validate(MaxBatchSize); err != nil {
		return err
	}
	switch c.InputType {
	case "", "search_document", "search_query", "classification", "clustering", "image":
	default:
		return fmt.Errorf("option input_type: must be search_document, search_query, classification, clustering or image, got %q", c.InputType)
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
	c.EmbedConfig = c.EmbedConfig.WithDefaults(DefaultBatchSize)
	if c.InputType == "" {
		c.InputType = DefaultInputType
	}
	return c, nil
}
