package llamacpp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/httpjson"
)

// maxPropsBytes bounds the answer of GET /props (its chat template is its
// largest part, a few KiB for common models).
const maxPropsBytes = 1 << 20

// Provider is the llamacpp provider of one pgimageai.models row: the shared
// batching embedder (httpjson.Batched) with the llamacpp request and answer.
// It is safe for concurrent use.
type Provider struct {
	*httpjson.Batched
	cfg      Config
	propsURL string // {base_url without /v1}/props
	key      string
	http     *http.Client // GET /props; follows no redirect

	mu     sync.Mutex
	shape  string // resolved request shape; "" = not yet
	marker string
	slots  bool // the concurrency started from /props' total_slots
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
	p := &Provider{cfg: cfg, propsURL: strings.TrimSuffix(ep.BaseURL, "/v1") + "/props", key: ep.Key, shape: cfg.RequestShape,
		http: provider.NewHTTPClient(nil)}
	if p.shape == ShapeMultimodalData {
		p.marker = DefaultMarker
	}
	p.Batched = httpjson.NewBatched(ep, "/embeddings", cfg.EmbedConfig, magic.DataURL, p.send)
	return p, nil
}

// Factory is New as a provider.Factory, for Registry.Register("llamacpp", llamacpp.Factory).
var Factory = provider.FactoryOf(New)

// send makes one request for a batch of data URLs.
func (p *Provider) send(ctx context.Context, dataURLs []string) ([]provider.Embedding, error) {
	shape, marker := p.requestShape(ctx)
	var a answer
	err := p.Client.Post(ctx, p.URL, newRequest(p.Model, shape, marker, p.cfg.Text, dataURLs), &a)
	if err != nil && shape == ShapeMultimodalData && staleMarker(err) && p.forget(marker) {
		// llama-server draws a new media marker at every start: a restarted
		// server cannot find the one /props gave before. Ask again, once.
		if shape2, marker2 := p.requestShape(ctx); shape2 != shape || marker2 != marker {
			err = p.Client.Post(ctx, p.URL, newRequest(p.Model, shape2, marker2, p.cfg.Text, dataURLs), &a)
		}
	}
	if err != nil {
		return nil, err
	}
	vecs, err := a.vectors(len(dataURLs))
	if err != nil {
		return nil, err
	}
	return httpjson.Embeddings(vecs, p.cfg.Dimensions, a.Usage.PromptTokens)
}

// requestShape returns the configured shape, or the one GET /props tells:
// multimodal_data with its media_marker (DefaultMarker when it has none), or
// content when there is no /props. The answer is kept; a failed lookup
// (network, 5xx) uses content for this request and asks again next time.
func (p *Provider) requestShape(ctx context.Context) (shape, marker string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shape != ShapeAuto {
		return p.shape, p.marker
	}
	pr, status, err := p.fetchProps(ctx)
	if err == nil {
		p.startFrom(pr)
	}
	switch {
	case err == nil:
		p.shape, p.marker = ShapeMultimodalData, pr.MediaMarker
		if p.marker == "" {
			p.marker = DefaultMarker
		}
	case status == http.StatusNotFound:
		p.shape = ShapeContent
	default:
		return ShapeContent, ""
	}
	return p.shape, p.marker
}

// startFrom sets the model's concurrency from the server's total_slots,
// once: what it serves at once (pace.Governor.ServerSlots). (With
// request_shape set, /props is not asked and the latency per request
// governs.)
func (p *Provider) startFrom(pr props) {
	if !p.slots && pr.TotalSlots > 0 {
		p.Pace().ServerSlots(pr.TotalSlots)
	}
	p.slots = true
}

// staleMarker reports whether err is llama-server's answer to a prompt whose
// media marker it does not know (HTTP 500 "Failed to tokenize prompt": the
// multimodal data outnumber the markers it finds).
func staleMarker(err error) bool {
	var pe *provider.Error
	return errors.As(err, &pe) && pe.Status == http.StatusInternalServerError && strings.Contains(pe.Message, "tokenize")
}

// forget drops the shape that GET /props gave, when marker is still the one
// in use and no option fixed the shape, so that the next request asks again.
// It reports whether it did.
func (p *Provider) forget(marker string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cfg.RequestShape != ShapeAuto || p.shape != ShapeMultimodalData || p.marker != marker {
		return false
	}
	p.shape, p.marker = ShapeAuto, ""
	return true
}

// fetchProps reads GET /props, bounded in time and bytes.
func (p *Provider) fetchProps(ctx context.Context) (props, int, error) {
	ctx, cancel := context.WithTimeout(ctx, min(time.Duration(p.cfg.Timeout), 10*time.Second))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.propsURL, nil)
	if err != nil {
		return props{}, 0, err
	}
	req.Header.Set("Accept", "application/json")
	if p.key != "" {
		req.Header.Set("Authorization", "Bearer "+p.key)
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return props{}, 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxPropsBytes+1))
	switch {
	case err != nil:
		return props{}, resp.StatusCode, err
	case resp.StatusCode != http.StatusOK:
		return props{}, resp.StatusCode, fmt.Errorf("GET /props: HTTP %d", resp.StatusCode)
	case len(raw) > maxPropsBytes:
		return props{}, resp.StatusCode, fmt.Errorf("GET /props: answer larger than %d bytes", maxPropsBytes)
	}
	var pr props
	if err := json.Unmarshal(raw, &pr); err != nil {
		return props{}, resp.StatusCode, fmt.Errorf("GET /props: %w", err)
	}
	return pr, resp.StatusCode, nil
}
