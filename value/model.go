package value

import "encoding/json"

// Model is a row of pgimageai.models: a name rules reference and how to
// reach it. provider.Model is this type.
type Model struct {
	Name      string          // models.name, what rules reference
	Provider  string          // registry name, e.g. "openai", "local"
	BaseURL   string          // "" = the provider's default
	Model     string          // the provider's model id, e.g. "gpt-4o-mini"
	APIKeyEnv string          // NAME of the environment variable holding the key; "" = no key
	Options   json.RawMessage // models.options; nil or {} = defaults
}
