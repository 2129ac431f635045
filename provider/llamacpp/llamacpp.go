package llamacpp

import (
	"context"
	"time"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/batch"
	"github.com/pgimageai/pgimageai/provider/httpjson"
)

// Provider is the llamacpp provider of one pgimageai.models row. It
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

// New builds the provider of model row m: base_url (required; http or https),
// options (decoded strictly, validated, defaulted) and the API key from the
// environment variable m.APIKeyEnv names (none named = no Authorization
// header). A nil env means os.LookupEnv.
func New(m provider.Model, env provider.Env) (*Provider, error) {
	ep, err := httpjson.NewEndpoint(m, env, "")
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

// Factory is New as a provider.Factory, for Registry.Register("llamacpp", llamacpp.Factory).
var Factory = provider.FactoryOf(New)

// Options returns the model's shared options, defaults applied.
func (p *Provider) Options() provider.Options { return p.cfg.Options }

// EmbedImage returns img's vector, sent in a batch with the images of
// concurrent calls, and its share of the request's prompt tokens. Every error
// is a *provider.Error.
func (p *Provider) EmbedImage(ctx context.Context, img provider.Image) (provider.Embedding, error) {
	f, err := httpjson.CheckImage(img)
	if err != nil {
		return provider.Embedding{}, err
	}
	return p.batcher.Do(ctx, magic.DataURL(f, img.Data))
}

// send makes one request for a batch of data URLs.
func (p *Provider) send(ctx context.Context, dataURLs []string) ([]provider.Embedding, error) {
	var a answer
	if err := p.client.Post(ctx, p.url, newRequest(p.model, dataURLs), &a); err != nil {
		return nil, err
	}
	vecs, err := a.vectors(len(dataURLs))
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
