package jina

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/httpjson"
)

// DefaultBaseURL is used when models.base_url is NULL.
const DefaultBaseURL = "https://api.jina.ai/v1"

// Batch sizes: the default, and the most inputs sent per request:
// jina-embeddings-v4 is reported to refuse more than 512.
const (
	DefaultBatchSize = 32
	MaxBatchSize     = 512
)

// Tasks are the values of task: jina-embeddings-v4's adapters
// (retrieval.query, retrieval.passage, code.query, code.passage,
// text-matching) and jina-embeddings-v3's (classification, separation).
var Tasks = []string{"retrieval.query", "retrieval.passage", "code.query", "code.passage", "text-matching", "classification", "separation"}

// Config is models.options for the jina provider: those of
// httpjson.EmbedConfig, task and normalized. Dimensions, when set, is also
// sent (Matryoshka truncation). Unknown keys are an error.
type Config struct {
	httpjson.EmbedConfig

	// Task is sent as task when set (e.g. retrieval.passage for stored
	// images that queries search).
	Task string `json:"task,omitempty"`
	// Normalized is sent as normalized when set: true asks for unit-length
	// vectors.
	Normalized *bool `json:"normalized,omitempty"`
}

// Validate reports the first invalid option.
func (c Config) Validate() error {
	if err := c.EmbedConfig.Validate(MaxBatchSize); err != nil {
		return err
	}
	if c.Task != "" && !slices.Contains(Tasks, c.Task) {
		return fmt.Errorf("option task: must be one of %v, got %q", Tasks, c.Task)
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
	return c, nil
}
