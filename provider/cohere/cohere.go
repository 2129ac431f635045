package cohere

import (
	"context"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/normalize"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/httpjson"
)

// Provider is the cohere provider of one pgimageai.models row: the shared
// batching embedder (httpjson.Batched) with the cohere request and answer.
// It is safe for concurrent use.
type Provider struct {
	*httpjson.Batched
	cfg Config
}

var _ provider.Embedder = (*Provider)(nil)

// New builds the provider of model row m: base_url (default DefaultBaseURL; http or https),
// options (decoded strictly, validated, defaulted) and the API key from the
// environment variable m.APIKeyEnv names (none named = no Authorization
// header). A nil env means os.LookupEnv.
func New(m provider.Model, env provider.Env) (*Provider, error) {
	ep, cfg, err := httpjson.Setup(m, env, DefaultBaseURL, ParseConfig)
	if err != nil {
		return nil, err
	}
	if err := checkModel(ep.Model); err != nil {
		return nil, err
	}
	p := &Provider{cfg: cfg}
	p.Batched = httpjson.NewBatched(ep, "/v2/embed", cfg.EmbedConfig, magic.DataURL, p.send)
	return p, nil
}

// Factory is New as a provider.Factory, for Registry.Register("cohere", cohere.Factory).
var Factory = provider.FactoryOf(New)

// send makes one request for a batch of data URLs.
func (p *Provider) send(ctx context.Context, dataURLs []string) ([]provider.Embedding, error) {
	var a answer
	if err := p.Client.Post(ctx, p.URL, newRequest(p.Model, p.cfg, dataURLs), &a); err != nil {
		return nil, err
	}
	vecs, err := a.vectors(len(dataURLs))
	if err != nil {
		return nil, err
	}
	return httpjson.Embeddings(vecs, p.cfg.Dimensions, a.tokens())
}

// ImageSize is Cohere's pixel rule (provider.ImageSizer): Embed v4
// downsamples an image of more than 2,458,624 pixels to that many.
func (p *Provider) ImageSize() normalize.Size { return normalize.Cohere }
