package jina

import (
	"context"
	"encoding/base64"
	"time"

	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/batch"
	"github.com/pgimageai/pgimageai/provider/httpjson"
)

// Provider is the jina provider of one pgimageai.models row. It
// implements provider.Embedder and is safe for concurrent use: concurrent
// EmbedImage calls are batched, and requests are bounded by the model's
// max_concurrency and requests_per_minute.
type Provider struct {
	model   string
	cfg     Config
	url     string // {base_url}/embeddings
	client  *httpjson.Client
	batcher *batch.Batcher[string, provider.Embedding]
}

var _ provider.Embedder = (*Provider)(nil)

// New builds the provider of model row m: base_url (default DefaultBaseURL; http or https),
// options (decoded strictly, validated, defaulted) and the API key from the
// environment variable m.APIKeyEnv names (none named = no Authorization
// header). A nil env means os.LookupEnv.
func New(m provider.Model, env provider.Env) (*Provider, error) {
	ep, err := httpjson.NewEndpoint(m, env, DefaultBaseURL)
	if err != nil {
		return nil, err
	}
	cfg, err := ParseConfig(m.Options)
	if err != nil {
		return nil, err
	}
	p := &Provider{
		model:  m.Model,
		cfg:    cfg,
		url:    ep.BaseURL + "/embeddings",
		client: httpjson.New(cfg.Options, ep.Key, nil),
	}
	p.batcher = batch.New(cfg.BatchSize, time.Duration(cfg.BatchWait), p.send)
	return p, nil
}

// Factory is New as a provider.Factory, for Registry.Register("jina", jina.Factory).
var Factory = provider.FactoryOf(New)

// Options returns the model's shared options, defaults applied.
func (p *Provider) Options() provider.Options { return p.cfg.Options }

// EmbedImage returns img's vector, sent in a batch with the images of
// concurrent calls, and its share of the request's prompt tokens. Every error
// is a *provider.Error.
func (p *Provider) EmbedImage(ctx context.Context, img provider.Image) (provider.Embedding, error) {
	if _, err := httpjson.CheckImage(img); err != nil {
		return provider.Embedding{}, err
	}
	return p.batcher.Do(ctx, base64.StdEncoding.EncodeToString(img.Data))
}

// send makes one request for a batch of base64-encoded images.
func (p *Provider) send(ctx context.Context, images []string) ([]provider.Embedding, error) {
	var a answer
	if err := p.client.Post(ctx, p.url, newRequest(p.model, images), &a); err != nil {
		return nil, err
	}
	vecs, err := httpjson.ByIndex(a.Data, len(images))
	if err == nil {
		err = httpjson.CheckDimensions(vecs, p.cfg.Dimensions)
	}
	if err != nil {
		return nil, err
	}
	out := make([]provider.Embedding, len(vecs))
	for i, v := range vecs {
		out[i] = provider.Embedding{Vector: v, Usage: provider.Usage{PromptTokens: batch.Share(a.Usage.PromptTokens, len(vecs), i)}}
	}
	return out, nil
}
