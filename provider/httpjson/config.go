package httpjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/provider"
)

// BaseURL returns models.base_url, or def when it is empty (def "" makes
// base_url required), once provider.ParseBaseURL accepts it (http or https,
// a host, no query, fragment or credentials), with any trailing slash removed
// so that paths can be appended as strings. Error messages never show
// credentials.
func BaseURL(raw, def string) (string, error) {
	if raw == "" {
		if def == "" {
			return "", errors.New("base_url: required for this provider (e.g. http://localhost:8000/v1)")
		}
		raw = def
	}
	if _, err := provider.ParseBaseURL(raw); err != nil {
		return "", err
	}
	return strings.TrimRight(raw, "/"), nil
}

// APIKey reads the key from the environment variable named by api_key_env.
// No variable named means no key (a local server); a variable named but unset
// or empty is an error, since every request would then fail with 401. A nil
// env means os.LookupEnv.
func APIKey(name string, env provider.Env) (string, error) {
	if name == "" {
		return "", nil
	}
	if env == nil {
		env = os.LookupEnv
	}
	key, ok := env(name)
	switch {
	case !ok:
		return "", fmt.Errorf("api_key_env: environment variable %s is not set", name)
	case key == "":
		return "", fmt.Errorf("api_key_env: environment variable %s is empty", name)
	}
	return key, nil
}

// Endpoint holds what every HTTP provider takes from its model row: the
// provider's model id, the base URL (def when the row has none; "" makes it
// required) and the API key from the environment variable the row names.
type Endpoint struct {
	Model, BaseURL, Key string
}

// NewEndpoint validates those parts of model row m.
func NewEndpoint(m provider.Model, env provider.Env, def string) (Endpoint, error) {
	if strings.TrimSpace(m.Model) == "" {
		return Endpoint{}, errors.New("model: the provider's model id is empty")
	}
	base, err := BaseURL(m.BaseURL, def)
	if err != nil {
		return Endpoint{}, err
	}
	key, err := APIKey(m.APIKeyEnv, env)
	if err != nil {
		return Endpoint{}, err
	}
	return Endpoint{Model: m.Model, BaseURL: base, Key: key}, nil
}

// Setup is what the New of every HTTP provider does first: the endpoint of
// model row m (NewEndpoint, with the default base URL def) and its options
// decoded, validated and defaulted by parse (the provider's ParseConfig).
func Setup[C any](m provider.Model, env provider.Env, def string, parse func(json.RawMessage) (C, error)) (Endpoint, C, error) {
	var cfg C
	ep, err := NewEndpoint(m, env, def)
	if err != nil {
		return ep, cfg, err
	}
	cfg, err = parse(m.Options)
	return ep, cfg, err
}

// CheckImage returns img's format, refusing an unknown media type or empty
// data before anything is sent.
func CheckImage(img provider.Image) (magic.Format, error) {
	f, ok := magic.ParseMIME(img.MIME)
	if !ok {
		return 0, provider.Errorf(provider.Permanent,
			"image type %q is not one of image/png, image/jpeg, image/gif, image/webp", img.MIME)
	}
	if len(img.Data) == 0 {
		return 0, provider.Errorf(provider.Permanent, "image is empty")
	}
	return f, nil
}
