package vllm

import (
	"context"
	"errors"
	"strings"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/httpjson"
)

// Provider is the vllm provider of one pgimageai.models row. It implements
// provider.Embedder and is safe for concurrent use; its requests are bounded
// by the model's max_concurrency and requests_per_minute.
type Provider struct {
	model  string
	cfg    Config
	url    string // {base_url}/embeddings
	client *httpjson.Client
}

var _ provider.Embedder = (*Provider)(nil)

// New builds the provider of model row m: base_url (required; http or https),
// options (decoded strictly, validated, defaulted) and the API key from the
// environment variable m.APIKeyEnv names (none named = no Authorization
// header). A nil env means os.LookupEnv.
func New(m provider.Model, env provider.Env) (*Provider, error) {
	if strings.TrimSpace(m.Model) == "" {
		return nil, errors.New("model: the provider's model id is empty")
	}
	cfg, err := ParseConfig(m.Options)
	if err != nil {
		return nil, err
	}
	base, err := httpjson.BaseURL(m.BaseURL, "")
	if err != nil {
		return nil, err
	}
	key, err := httpjson.APIKey(m.APIKeyEnv, env)
	if err != nil {
		return nil, err
	}
	return &Provider{
		model:  m.Model,
		cfg:    cfg,
		url:    base + "/embeddings",
		client: httpjson.New(cfg.Options, key, nil),
	}, nil
}

// Factory is New as a provider.Factory, for Registry.Register("vllm", vllm.Factory).
func Factory(m provider.Model, env provider.Env) (provider.Provider, error) {
	p, err := New(m, env)
	if err != nil {
		return nil, err // not a typed nil inside the interface
	}
	return p, nil
}

// Options returns the model's shared options, defaults applied.
func (p *Provider) Options() provider.Options { return p.cfg.Options }

// EmbedImage sends img to {base_url}/embeddings and returns its vector and
// the reported prompt tokens. Every error is a *provider.Error.
func (p *Provider) EmbedImage(ctx context.Context, img provider.Image) (provider.Embedding, error) {
	f, ok := magic.ParseMIME(img.MIME)
	if !ok {
		return provider.Embedding{}, provider.Errorf(provider.Permanent,
			"image type %q is not one of image/png, image/jpeg, image/gif, image/webp", img.MIME)
	}
	if len(img.Data) == 0 {
		return provider.Embedding{}, provider.Errorf(provider.Permanent, "image is empty")
	}
	var a answer
	if err := p.client.Post(ctx, p.url, newRequest(p.model, magic.DataURL(f, img.Data)), &a); err != nil {
		return provider.Embedding{}, err
	}
	vecs, err := httpjson.ByIndex(a.Data, 1)
	if err == nil {
		err = httpjson.CheckDimensions(vecs, p.cfg.Dimensions)
	}
	if err != nil {
		return provider.Embedding{}, err
	}
	return provider.Embedding{Vector: vecs[0], Usage: provider.Usage{PromptTokens: a.Usage.PromptTokens}}, nil
}
