package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pgimageai/pgimageai/provider"
)

// DefaultBaseURL is used when models.base_url is NULL.
const DefaultBaseURL = "https://api.openai.com/v1"

// Config is models.options for the openai provider: the shared keys of
// provider.Options plus the chat-completion parameters below. Unknown keys are
// an error, so that a misspelt option never goes unnoticed.
type Config struct {
	provider.Options

	MaxTokens    *int     `json:"max_tokens,omitempty"`    // >= 1; unset = the server's default
	Temperature  *float32 `json:"temperature,omitempty"`   // 0..2; sent whenever set, 0 included
	TopP         *float32 `json:"top_p,omitempty"`         // 0..1; sent whenever set, 0 included
	Detail       string   `json:"detail,omitempty"`        // "auto", "low" or "high"; "" = not sent
	SystemPrompt string   `json:"system_prompt,omitempty"` // "" = no system message

	// ResponseFormat is a JSON Schema the answer must follow (the provider contract,
	// structured output); it is sent as response_format
	// {"type":"json_schema","json_schema":{"name":"result","schema":…}}.
	ResponseFormat json.RawMessage `json:"response_format,omitempty"`

	BatchOptions // batch_api and its bounds (batch.go)
}

// Validate reports the first invalid option.
func (c Config) Validate() error {
	if err := c.Options.Validate(); err != nil {
		return err
	}
	if err := c.BatchOptions.Validate(); err != nil {
		return err
	}
	switch {
	case c.MaxTokens != nil && *c.MaxTokens < 1:
		return fmt.Errorf("option max_tokens: must be >= 1, got %d", *c.MaxTokens)
	case c.Temperature != nil && (*c.Temperature < 0 || *c.Temperature > 2):
		return fmt.Errorf("option temperature: must be between 0 and 2, got %v", *c.Temperature)
	case c.TopP != nil && (*c.TopP < 0 || *c.TopP > 1):
		return fmt.Errorf("option top_p: must be between 0 and 1, got %v", *c.TopP)
	}
	switch c.Detail {
	case "", "auto", "low", "high":
	default:
		return fmt.Errorf("option detail: must be auto, low or high, got %q", c.Detail)
	}
	if len(c.ResponseFormat) > 0 {
		var schema map[string]any
		if err := json.Unmarshal(c.ResponseFormat, &schema); err != nil || schema == nil {
			return errors.New("option response_format: must be a JSON Schema object")
		}
	}
	return nil
}

// ParseConfig decodes models.options strictly (an unknown key is an error
// naming it), validates it and applies the shared defaults.
func ParseConfig(raw json.RawMessage) (Config, error) {
	var c Config
	if err := provider.DecodeStrict(raw, &c); err != nil {
		return Config{}, err
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	c.Options = c.Options.WithDefaults()
	if len(bytes.TrimSpace(c.ResponseFormat)) == 0 {
		c.ResponseFormat = nil
	}
	return c, nil
}

// parseBaseURL returns models.base_url, or the default when it is empty, once
// provider.ParseBaseURL accepts it: http or https, a host, no query, fragment
// or credentials (go-openai appends "/chat/completions" to it as a string).
// Error messages never show credentials.
func parseBaseURL(raw string) (string, error) {
	if raw == "" {
		return DefaultBaseURL, nil
	}
	if _, err := provider.ParseBaseURL(raw); err != nil {
		return "", err
	}
	return raw, nil
}
