package llamacpp

import (
	"encoding/json"

	"github.com/pgimageai/pgimageai/provider/httpjson"
)

// Batch sizes: the default, and the most accepted (llama-server embeds the
// inputs of a request one after another within its batch/ubatch budget, so
// very large requests only add latency).
const (
	DefaultBatchSize = 16
	MaxBatchSize     = 256
)

// Config is models.options for the llamacpp provider: see httpjson.EmbedConfig.
type Config = httpjson.EmbedConfig

// ParseConfig decodes models.options strictly (an unknown key is an error
// naming it), validates it and applies the defaults.
func ParseConfig(raw json.RawMessage) (Config, error) {
	return httpjson.ParseEmbedConfig(raw, DefaultBatchSize, MaxBatchSize)
}
