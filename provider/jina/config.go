package jina

import (
	"encoding/json"

	"github.com/pgimageai/pgimageai/provider/httpjson"
)

// DefaultBaseURL is used when models.base_url is NULL.
const DefaultBaseURL = "https://api.jina.ai/v1"

// Batch sizes: the default, and the most inputs Jina's embeddings endpoint
// accepts per request.
const (
	DefaultBatchSize = 32
	MaxBatchSize     = 2048
)

// Config is models.options for the jina provider: see httpjson.EmbedConfig.
type Config = httpjson.EmbedConfig

// ParseConfig decodes models.options strictly (an unknown key is an error
// naming it), validates it and applies the defaults.
func ParseConfig(raw json.RawMessage) (Config, error) {
	return httpjson.ParseEmbedConfig(raw, DefaultBatchSize, MaxBatchSize)
}
