package local

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/normalize"
	"github.com/pgimageai/pgimageai/provider"
)

// Provider is the local provider of one pgimageai.models row. It implements
// provider.TextGenerator and provider.Embedder and is safe for concurrent use;
// its calls are bounded by the model's max_concurrency and
// requests_per_minute.
type Provider struct {
	cfg     Config
	timeout time.Duration
	limiter *provider.Limiter
}

var (
	_ provider.TextGenerator = (*Provider)(nil)
	_ provider.Embedder      = (*Provider)(nil)
)

// New builds the provider of model row m from its options (decoded strictly,
// validated, defaulted). m.Model is free text; m.BaseURL and m.APIKeyEnv are
// ignored, and env is not consulted.
func New(m provider.Model, env provider.Env) (*Provider, error) {
	cfg, err := ParseConfig(m.Options)
	if err != nil {
		return nil, err
	}
	return &Provider{
		cfg:     cfg,
		timeout: time.Duration(cfg.Timeout),
		limiter: provider.NewLimiter(cfg.MaxConcurrency, cfg.RequestsPerMinute),
	}, nil
}

// Factory is New as a provider.Factory, for Registry.Register("local", local.Factory).
var Factory = provider.FactoryOf(New)

// Options returns the model's shared options, defaults applied.
func (p *Provider) Options() provider.Options { return p.cfg.Options }

// Config returns the model's options, defaults applied.
func (p *Provider) Config() Config { return p.cfg }

// CallMemory implements provider.MemoryCoster: what decoding img allocates,
// estimated from its header; 0 when it will not be decoded (an unreadable
// header, or over a limit: refused before decoding).
func (p *Provider) CallMemory(img []byte) int64 {
	f, err := magic.Detect(img)
	if err != nil {
		return 0
	}
	cfg, err := guard(codecs[f].config, img)
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return 0
	}
	limits := p.cfg.Limits()
	if limits.check(f, img, cfg.Width, cfg.Height) != nil {
		return 0
	}
	return decodedBytes(f, img, cfg.Width, cfg.Height)
}

// GenerateText describes img from its pixels: format, size, dominant colours,
// brightness and, when notable, transparency. The prompt does not change the
// description, and Usage is zero. Every error is a *provider.Error.
func (p *Provider) GenerateText(ctx context.Context, img provider.Image, prompt string) (provider.Completion, error) {
	pic, err := p.load(ctx, img)
	if err != nil {
		return provider.Completion{}, err
	}
	return provider.Completion{Text: describe(pic)}, nil
}

// EmbedImage returns img's perceptual vector: Dimensions values of unit
// length (see Dimensions for the layout). Usage is zero. Every error is a
// *provider.Error.
func (p *Provider) EmbedImage(ctx context.Context, img provider.Image) (provider.Embedding, error) {
	pic, err := p.load(ctx, img)
	if err != nil {
		return provider.Embedding{}, err
	}
	return provider.Embedding{Vector: embed(pic.small)}, nil
}

// load waits for the limiter, then decodes and downscales img within the
// model's timeout.
func (p *Provider) load(ctx context.Context, img provider.Image) (picture, error) {
	release, err := p.limiter.Acquire(ctx)
	if err != nil {
		return picture{}, stopped(err, "image analysis stopped: %v", err)
	}
	defer release()

	wctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	pic, err := load(wctx, img, p.cfg.Limits())
	var pe *provider.Error
	switch {
	case err == nil:
		return pic, nil
	case errors.As(err, &pe):
		return picture{}, err
	case ctx.Err() == nil: // our own timeout, not the caller's context
		return picture{}, stopped(err, "image analysis took longer than the timeout of %s", p.timeout)
	default:
		return picture{}, stopped(err, "image analysis stopped: %v", err)
	}
}

// stopped turns the end of a context into a transient provider error: a
// shutdown, or an image too slow for the timeout that a later attempt with a
// longer timeout may get through.
func stopped(err error, format string, args ...any) error {
	return &provider.Error{Kind: provider.Transient, Message: fmt.Sprintf(format, args...), Err: err}
}

// ImageSize is no bound (provider.ImageSizer): the local provider decodes
// the image and reduces it itself, so a resize before it would only add a
// decode. Its images are still turned upright and converted.
func (p *Provider) ImageSize() normalize.Size { return normalize.Size{} }
