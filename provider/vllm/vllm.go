package vllm

import (
	"context"

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
	ep, cfg, err := httpjson.Setup(m, env, "", ParseConfig)
	if err != nil {
		return nil, err
	}
	client := httpjson.New(cfg.Options, ep.Key, nil)
	client.MaxAnswerBytes = provider.EmbedAnswerBytes(1, cfg.Dimensions)
	return &Provider{
		model:  m.Model,
		cfg:    cfg,
		url:    ep.BaseURL + "/embeddings",
		client: client,
	}, nil
}

// Factory is New as a provider.Factory, for Registry.Register("vllm", vllm.Factory).
var Factory = provider.FactoryOf(New)

// Options returns the model's shared options, defaults applied.
func (p *Provider) Options() provider.Options { return p.cfg.Options }

// EmbedImage sends img to {base_url}/embeddings and returns its vector and
// the reported prompt tokens. Every error is a *provider.Error.
func (p *Provider) EmbedImage(ctx context.Context, img provider.Image) (provider.Embedding, error) {
	f, err := httpjson.CheckImage(img)
	if err != nil {
		return provider.Embedding{}, err
	}
	var a answer
	if err := p.client.Post(ctx, p.url, newRequest(p.model, p.cfg, magic.DataURL(f, img.Data)), &a); err != nil {
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
