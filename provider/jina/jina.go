package jina

import (
	"context"
	"encoding/base64"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/httpjson"
)

// Provider is the jina provider of one pgimageai.models row: the shared
// batching embedder (httpjson.Batched) with the jina request and answer.
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
	p.Batched = httpjson.NewBatched(ep, "/embeddings", cfg.EmbedConfig, base64Input, p.send)
	return p, nil
}

// Factory is New as a provider.Factory, for Registry.Register("jina", jina.Factory).
var Factory = provider.FactoryOf(New)

// send makes one request for a batch of base64-encoded images.
func (p *Provider) send(ctx context.Context, images []string) ([]provider.Embedding, error) {
	var a answer
	if err := p.Client.Post(ctx, p.URL, newRequest(p.Model, p.cfg, images), &a); err != nil {
		return nil, err
	}
	vecs, err := httpjson.ByIndex(a.Data, len(images))
	if err != nil {
		return nil, err
	}
	return httpjson.Embeddings(vecs, p.cfg.Dimensions, a.tokens())
}

// base64Input encodes an image as Jina takes it: plain base64, no data URL.
func base64Input(_ magic.Format, img []byte) string { return base64.StdEncoding.EncodeToString(img) }
