package cohere

import (
	"encoding/json"
	"fmt"
	"strings"

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
// as output_dimension, which embed-v4.0 takes as 256, 512, 1024 or 1536.
type Config struct {
	httpjson.EmbedConfig

	// InputType is sent as input_type, which Cohere requires: with inputs,
	// one of search_document (default), search_query, classification or
	// clustering (cohere-python src/cohere/types/embed_input_type.py).
	InputType string `json:"input_type,omitempty"`
}

// Validate reports the first invalid option.
func (c Config) Validate() error {
	if err := c.EmbedConfig.Validate(MaxBatchSize); err != nil {
		return err
	}
	switch c.InputType {
	case "", "search_document", "search_query", "classification", "clustering":
	default:
		return fmt.Errorf("option input_type: must be search_document, search_query, classification or clustering, got %q", c.InputType)
	}
	return nil
}

// checkModel refuses the models that take no images in inputs: images in
// inputs are embed-v4.0's (the v3.0 models take one image per request in
// the images field, which this provider does not send).
func checkModel(model string) error {
	if strings.HasSuffix(model, "-v3.0") || strings.HasSuffix(model, "-v2.0") {
		return fmt.Errorf("model %s: Cohere embeds images given in inputs with embed-v4.0 (or later), not with the v3.0 and v2.0 models", model)
	}
	return nil
}

// ParseConfig decodes models.options strictly (an unknown key is an error
// naming it), validates it and applies the defaults.
func ParseConfig(raw json.RawMessage) (Config, error) {
	c, err := provider.DecodeConfig[Config](raw)
	if err != nil {
		return Config{}, err
	}
	c.EmbedConfig = c.EmbedConfig.WithDefaults(DefaultBatchSize)
	if c.InputType == "" {
		c.InputType = DefaultInputType
	}
	return c, nil
}
