package openai

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/normalize"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/httpjson"
	"github.com/pgimageai/pgimageai/provider/pace"
)

// Provider is the openai provider of one pgimageai.models row. It implements
// provider.TextGenerator and is safe for concurrent use; its requests are
// governed per model (provider/pace): an adaptive concurrency under
// max_concurrency, a pace from the rate-limit headers under
// requests_per_minute and tokens_per_minute.
type Provider struct {
	model   string
	cfg     Config
	redact  *provider.Redactor // the key, for scrubbing error messages
	timeout time.Duration
	client  *goopenai.Client
	retrier provider.Retrier
	gov     *pace.Governor
	// prompt is the prompt tokens the last answer reported: the estimate
	// of a request's input when no documented rule counts its image.
	prompt atomic.Int64
	// placeholder stands for the data URL in the body go-openai marshals:
	// random per provider, so no prompt can contain it.
	placeholder string
	batch       *batchClient // the Batch API (batch.go); nil unless batch_api
	server      *server      // a self-hosted server's queue signal (server.go); nil for a hosted API
}

var _ provider.TextGenerator = (*Provider)(nil)

// New builds the provider of model row m: base URL (default DefaultBaseURL;
// http or https only), options (decoded strictly, validated, defaulted) and
// the API key from the environment variable m.APIKeyEnv names (none named =
// no Authorization header). A nil env means os.LookupEnv.
func New(m provider.Model, env provider.Env) (*Provider, error) {
	if strings.TrimSpace(m.Model) == "" {
		return nil, errors.New("model: the provider's model id is empty")
	}
	cfg, err := ParseConfig(m.Options)
	if err != nil {
		return nil, err
	}
	base, err := parseBaseURL(m.BaseURL)
	if err != nil {
		return nil, err
	}
	key, err := httpjson.APIKey(m.APIKeyEnv, env)
	if err != nil {
		return nil, err
	}

	cfg.Options = cfg.Options.SelfHostedOr(isSelfHosted(base))

	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = cfg.MaxConcurrency // keep connections of concurrent requests alive
	// A request of a small image leaves in one write: headers and body
	// (net/http's 4 KiB default made three or four system calls of it).
	transport.WriteBufferSize = 64 << 10
	cc := goopenai.DefaultConfig(key)
	cc.BaseURL = base
	cc.HTTPClient = &doer{client: provider.NewHTTPClient(transport), maxAnswer: provider.MaxChatAnswerBytes}

	p := &Provider{
		model:       m.Model,
		cfg:         cfg,
		redact:      provider.NewRedactor(key),
		timeout:     time.Duration(cfg.Timeout),
		client:      goopenai.NewClientWithConfig(cc),
		retrier:     provider.Retrier{MaxRetries: *cfg.MaxRetries},
		gov:         cfg.Options.Governor(),
		placeholder: "pgimageai-image-" + rand.Text(),
	}
	if cfg.BatchAPI {
		p.batch = newBatchClient(cfg, base, key)
	}
	if *cfg.SelfHosted {
		p.server = newServer(base, key)
	}
	return p, nil
}

// Factory is New as a provider.Factory, for Registry.Register("openai", openai.Factory).
var Factory = provider.FactoryOf(New)

// Options returns the model's shared options, defaults applied
// (max_image_bytes, formats, ...), for the checks made before a call.
func (p *Provider) Options() provider.Options { return p.cfg.Options }

// GenerateText sends img and prompt to {base_url}/chat/completions and returns
// the first choice's text and the reported token usage. Each attempt waits for
// the model's governor, has the model's timeout, and is retried per provider.Retrier
// (max_retries). Every error is a *provider.Error.
func (p *Provider) GenerateText(ctx context.Context, img provider.Image, prompt string) (provider.Completion, error) {
	f, ok := magic.ParseMIME(img.MIME)
	if !ok {
		return provider.Completion{}, provider.Errorf(provider.Permanent,
			"image type %q is not one of image/png, image/jpeg, image/gif, image/webp", img.MIME)
	}
	if len(img.Data) == 0 {
		return provider.Completion{}, provider.Errorf(provider.Permanent, "image is empty")
	}
	// go-openai marshals the request with a short placeholder for the data
	// URL; doer writes the image's base64 in its place, in one pass into the
	// body (see splice in wire.go).
	req := p.request(p.placeholder, prompt)
	fix := wireFix{emptyText: prompt == "", temperature: p.cfg.Temperature, topP: p.cfg.TopP}
	image := &spliced{placeholder: p.placeholder, format: f, data: img.Data}

	var out provider.Completion
	err := p.retrier.Do(ctx, func(ctx context.Context) error {
		c, err := p.attempt(ctx, req, fix, image, prompt)
		if err == nil {
			out = c
		}
		return err
	})
	if err != nil {
		return provider.Completion{}, err
	}
	return out, nil
}

// request builds the chat request: the system message when system_prompt is
// set, then one user message of a text part followed by an image_url part.
func (p *Provider) request(dataURL, prompt string) goopenai.ChatCompletionRequest {
	var msgs []goopenai.ChatCompletionMessage
	if p.cfg.SystemPrompt != "" {
		msgs = append(msgs, goopenai.ChatCompletionMessage{
			Role:    goopenai.ChatMessageRoleSystem,
			Content: p.cfg.SystemPrompt,
		})
	}
	msgs = append(msgs, goopenai.ChatCompletionMessage{
		Role: goopenai.ChatMessageRoleUser,
		MultiContent: []goopenai.ChatMessagePart{
			{Type: goopenai.ChatMessagePartTypeText, Text: prompt}, // "" restored by wireFix
			{Type: goopenai.ChatMessagePartTypeImageURL, ImageURL: &goopenai.ChatMessageImageURL{
				URL:    dataURL,
				Detail: goopenai.ImageURLDetail(p.cfg.Detail),
			}},
		},
	})
	req := goopenai.ChatCompletionRequest{Model: p.model, Messages: msgs}
	if p.cfg.MaxTokens != nil {
		req.MaxTokens = *p.cfg.MaxTokens
	}
	if p.cfg.Temperature != nil {
		req.Temperature = *p.cfg.Temperature // 0 is restored by wireFix
	}
	if p.cfg.TopP != nil {
		req.TopP = *p.cfg.TopP // 0 is restored by wireFix
	}
	if p.cfg.ResponseFormat != nil {
		req.ResponseFormat = &goopenai.ChatCompletionResponseFormat{
			Type: goopenai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &goopenai.ChatCompletionResponseFormatJSONSchema{
				Name:   "result",
				Schema: p.cfg.ResponseFormat,
			},
		}
	}
	return req
}

// attempt makes one HTTP request: its turn from the model's governor, the
// per-request timeout, and the classification of its outcome, which goes
// back to the governor.
func (p *Provider) attempt(ctx context.Context, req goopenai.ChatCompletionRequest, fix wireFix, image *spliced, prompt string) (provider.Completion, error) {
	if p.server != nil {
		p.server.check(ctx, p.gov)
	}
	ticket, err := p.gov.Acquire(ctx, p.tokens(image, prompt))
	if err != nil {
		return provider.Completion{}, &provider.Error{Kind: provider.Transient, Message: err.Error(), Err: err}
	}
	actx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	ex := &exchange{image: image}
	if fix.needed() {
		ex.fix = &fix
	}
	resp, err := p.client.CreateChatCompletion(withExchange(actx, ex), req)
	if err != nil {
		e := p.classify(ctx, actx, ex, err)
		ticket.Done(pace.Outcome{Header: ex.header, Status: ex.status, Limited: e.RateLimited,
			TimedOut: ex.status == 0 && ctx.Err() == nil && actx.Err() != nil})
		return provider.Completion{}, e
	}
	ticket.Done(pace.Outcome{Header: ex.header, Status: ex.status, Tokens: resp.Usage.CompletionTokens})
	if n := resp.Usage.PromptTokens; n > 0 {
		p.prompt.Store(int64(n))
	}
	return p.completion(resp)
}

// tokens estimates what a request counts against a tokens-per-minute
// limit, the way OpenAI counts it before the answer (https://platform.openai.com/
// docs/guides/rate-limits): the image by the model's documented tile rule
// (or, for a model without one, the prompt tokens the last answer
// reported), the text at four characters a token, and max_tokens.
func (p *Provider) tokens(image *spliced, prompt string) int {
	n := int64(len(p.cfg.SystemPrompt)+len(prompt)) / 4
	if r, ok := RuleOf(p.model); ok {
		if w, h, ok := normalize.Dimensions(image.data, image.format); ok {
			n += r.Tokens(p.cfg.Detail, w, h)
		}
	} else {
		n = max(n, p.prompt.Load())
	}
	if p.cfg.MaxTokens != nil {
		n += int64(*p.cfg.MaxTokens)
	}
	return int(min(n, 1<<30))
}

// Pace is the model's governor, for status and metrics.
func (p *Provider) Pace() *pace.Governor { return p.gov }

// completion extracts the answer of a 2xx response: the first choice's text,
// which must not be empty.
func (p *Provider) completion(resp goopenai.ChatCompletionResponse) (provider.Completion, error) {
	if len(resp.Choices) == 0 {
		return provider.Completion{}, p.badResponse("no choices in the answer")
	}
	choice := resp.Choices[0]
	text := choice.Message.Content
	if text == "" {
		for _, part := range choice.Message.MultiContent { // content given as parts
			if part.Type == goopenai.ChatMessagePartTypeText {
				text += part.Text
			}
		}
	}
	if err := provider.CheckText(text); err != nil {
		return provider.Completion{}, err
	}
	if strings.TrimSpace(text) == "" {
		if choice.Message.Refusal != "" {
			return provider.Completion{}, p.badResponse("no choices: the model refused: %s", choice.Message.Refusal)
		}
		return provider.Completion{}, p.badResponse("no choices with content (finish_reason %q)", choice.FinishReason)
	}
	if p.cfg.ResponseFormat != nil {
		if err := checkStructured(p.cfg.ResponseFormat, text); err != nil {
			// Scrubbed before it is cut: a cut key would escape Redact.
			return provider.Completion{}, p.badResponse("%v: %s", err, first(p.scrub(text), 200))
		}
	}
	return provider.Completion{
		Text: text,
		Usage: provider.Usage{
			PromptTokens:     resp.Usage.PromptTokens,
			CompletionTokens: resp.Usage.CompletionTokens,
		},
	}, nil
}

// checkStructured validates a structured-output answer: JSON, and an object
// with every key the schema's top level requires.
func checkStructured(schema json.RawMessage, text string) error {
	var answer any
	if err := json.Unmarshal([]byte(text), &answer); err != nil {
		return errors.New("the answer is not valid JSON")
	}
	var s struct {
		Required []string `json:"required"`
	}
	if json.Unmarshal(schema, &s) != nil || len(s.Required) == 0 {
		return nil
	}
	obj, ok := answer.(map[string]any)
	if !ok {
		return errors.New("the answer is not a JSON object")
	}
	for _, k := range s.Required {
		if _, ok := obj[k]; !ok {
			return fmt.Errorf("the answer lacks the required key %q", k)
		}
	}
	return nil
}

// first returns at most n characters of s.
func first(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// ImageSize is what the model looks at, per the detail option
// (provider.ImageSizer): a 512 × 512 version for low; for high, and for
// auto or unset (which may choose high), the image fit in 2048 × 2048 and
// then to a shortest side of 768
// (https://platform.openai.com/docs/guides/images-vision).
func (p *Provider) ImageSize() normalize.Size {
	if p.cfg.Detail == "low" {
		return normalize.OpenAILow
	}
	return normalize.OpenAIHigh
}
