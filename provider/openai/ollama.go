package openai

import (
	"encoding/json"
	"fmt"

	"github.com/pgimageai/pgimageai/provider"
)

// OllamaBaseURL is where Ollama serves its OpenAI-compatible API by default
// (https://github.com/ollama/ollama/blob/main/docs/openai.md).
const OllamaBaseURL = "http://127.0.0.1:11434/v1"

// OllamaTimeout is the default per-request timeout of provider ollama: a
// vision model on a CPU takes minutes for one answer where a hosted API
// takes seconds.
const OllamaTimeout = "5m"

// NewOllama is New with Ollama's defaults: base URL OllamaBaseURL, timeout
// OllamaTimeout unless the options set one. Ollama's chat takes images
// through its OpenAI-compatible /v1/chat/completions; its embeddings
// (/api/embed, /v1/embeddings) take text only, so provider ollama has no
// image embedding, like openai.
func NewOllama(m provider.Model, env provider.Env) (*Provider, error) {
	if m.BaseURL == "" {
		m.BaseURL = OllamaBaseURL
	}
	opts := map[string]json.RawMessage{}
	if len(m.Options) > 0 {
		if err := json.Unmarshal(m.Options, &opts); err != nil {
			return nil, fmt.Errorf("options: %w", err)
		}
	}
	if _, set := opts["timeout"]; !set {
		opts["timeout"] = json.RawMessage(`"` + OllamaTimeout + `"`)
		b, err := json.Marshal(opts)
		if err != nil {
			return nil, err
		}
		m.Options = b
	}
	return New(m, env)
}

// OllamaFactory is NewOllama as a provider.Factory, for
// Registry.Register("ollama", openai.OllamaFactory).
var OllamaFactory = provider.FactoryOf(NewOllama)
