package voyage

import (
	"context"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/normalize"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/httpjson"
)

// Provider is the voyage provider of one pgimageai.models row: the shared
// batching embedder (httpjson.Batched) with the voyage request and answer.
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
	p := &Provider{cfg: cfg}
	p.Batched = httpjson.NewBatched(ep, "/multimodalembeddings", cfg, magic.DataURL, p.send)
	p.WeighBy(imageTokens, MaxRequestTokens)
	return p, nil
}

// Factory is New as a provider.Factory, for Registry.Register("voyage", voyage.Factory).
var Factory = provider.FactoryOf(New)

// send makes one request for a batch of data URLs.
func (p *Provider) send(ctx context.Context, dataURLs []string) ([]provider.Embedding, error) {
	var a answer
	if err := p.Client.Post(ctx, p.URL, newRequest(p.Model, dataURLs), &a); err != nil {
		return nil, err
	}
	vecs, err := httpjson.ByIndex(a.Data, len(dataURLs))
	if err != nil {
		return nil, err
	}
	return httpjson.Embeddings(vecs, p.cfg.Dimensions, a.Usage.TotalTokens)
}

// ImageSize is Voyage's pixel rule (provider.ImageSizer): its multimodal
// models read images of at most 2,000,000 pixels and count a token per 560.
func (p *Provider) ImageSize() normalize.Size { return normalize.Voyage }
