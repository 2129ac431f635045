package httpjson

import (
	"context"
	"time"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/batch"
	"github.com/pgimageai/pgimageai/provider/pace"
)

// Batched is what the embedding providers that send many images per request
// (llamacpp, voyage, cohere, jina) have in common: the endpoint, the client
// and the batcher. A provider embeds it and supplies how an image is encoded
// and how a batch is sent. It implements provider.Embedder and is safe for
// concurrent use: concurrent EmbedImage calls are batched, and requests are
// bounded by the model's max_concurrency and requests_per_minute.
type Batched struct {
	Model  string  // the provider's model id
	URL    string  // the endpoint, {base_url}/path
	Client *Client // retries, limits, key redaction

	opts    provider.Options
	encode  func(magic.Format, []byte) string
	weigh   func(magic.Format, []byte) int // nil = not weighed
	batcher *batch.Batcher[input, provider.Embedding]
	size    int // batch_size
}

// input is one image of a batch: its encoding and its estimated weight.
type input struct {
	enc    string
	weight int
}

// Send makes one request for a batch of encoded images and returns one
// embedding per input, in order.
type Send func(ctx context.Context, inputs []string) ([]provider.Embedding, error)

// NewBatched returns the shared part of a batching provider of options cfg
// posting to ep.BaseURL+path; encode turns an image into one input of a
// request. A batch that the service refuses because of one input
// (provider.InputRefused) is split until that input fails alone. An answer
// is bounded by cfg.AnswerBytes.
func NewBatched(ep Endpoint, path string, cfg EmbedConfig, encode func(magic.Format, []byte) string, send Send) *Batched {
	opts, bc := cfg.Options, cfg.Config
	sendInputs := func(ctx context.Context, ins []input) ([]provider.Embedding, error) {
		encs := make([]string, len(ins))
		for i, in := range ins {
			encs[i] = in.enc
		}
		return send(ctx, encs)
	}
	client := New(opts, ep.Key, nil)
	client.MaxAnswerBytes = cfg.AnswerBytes()
	return &Batched{
		Model:   ep.Model,
		URL:     ep.BaseURL + path,
		Client:  client,
		opts:    opts,
		encode:  encode,
		batcher: batch.New(bc.BatchSize, time.Duration(bc.BatchWait), sendInputs).SplitOn(provider.InputRefused),
		size:    bc.BatchSize,
	}
}

// WeighBy bounds the estimated weight (tokens) of a request: weigh
// estimates an image's, and a batch is sent before its total would pass
// limit. Call it right after NewBatched.
func (b *Batched) WeighBy(weigh func(magic.Format, []byte) int, limit int) {
	b.weigh = weigh
	b.batcher.Weigh(func(in input) int { return in.weight }, limit)
}

// Parallelism is how many calls feed the batches (provider.Parallel): one
// request more than the governor lets in flight now, of batch_size images
// each, so that the limit can be seen full and grow; it follows the limit.
func (b *Batched) Parallelism() int {
	return min(b.Client.gov.Limit()+1, b.Client.gov.Ceiling()) * b.size
}

// Pace is the model's governor, for status and metrics.
func (b *Batched) Pace() *pace.Governor { return b.Client.gov }

// Options returns the model's shared options, defaults applied.
func (b *Batched) Options() provider.Options { return b.opts }

// EmbedImage returns img's vector, sent in a batch with the images of
// concurrent calls, and its share of the request's tokens. Every error is a
// *provider.Error.
func (b *Batched) EmbedImage(ctx context.Context, img provider.Image) (provider.Embedding, error) {
	f, err := CheckImage(img)
	if err != nil {
		return provider.Embedding{}, err
	}
	if !b.opts.Allows(f) {
		return provider.Embedding{}, provider.Errorf(provider.Permanent, "image type %s is not among the model's formats %v", img.MIME, b.opts.Formats)
	}
	in := input{enc: b.encode(f, img.Data)}
	if b.weigh != nil {
		in.weight = b.weigh(f, img.Data)
	}
	return b.batcher.Do(ctx, in)
}
