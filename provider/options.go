package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/provider/pace"
)

// Defaults of the options every provider shares.
const (
	DefaultTimeout    = 60 * time.Second
	DefaultMaxRetries = 4
	// DefaultMaxConcurrency is the ceiling of a model's adaptive
	// concurrency when max_concurrency is not set; it starts from
	// pace.DefaultStart (8) and follows the provider's latency and 429s.
	DefaultMaxConcurrency = 64
	DefaultMaxImageBytes  = 20 << 20
	// DefaultMaxPromptBytes bounds a prompt rendered from a template whose
	// {{column}} values come from the source row.
	DefaultMaxPromptBytes = 64 << 10
)

// Options are the keys of models.options that every provider understands.
// Provider configs embed it so that one JSON object carries both the shared
// and the provider's own keys.
type Options struct {
	Timeout    Duration `json:"timeout,omitempty"`     // per request; default 60s
	MaxRetries *int     `json:"max_retries,omitempty"` // default 4; 0 = no retry
	PaceOptions
	MaxImageBytes int64 `json:"max_image_bytes,omitempty"` // default 20 MiB
	// MaxPromptBytes bounds a call's prompt as rendered from its
	// template; default 64 KiB. A longer one is a too_large row, sent
	// nowhere.
	MaxPromptBytes int64    `json:"max_prompt_bytes,omitempty"`
	Formats        []string `json:"formats,omitempty"` // allowed MIME types; default all four
	SpendOptions
	NormalizeOptions // normalize and its bounds (normalize.go)
}

// PaceOptions are the keys that bound how many requests a model has in
// flight and how fast they start (package provider/pace).
type PaceOptions struct {
	MaxConcurrency    int `json:"max_concurrency,omitempty"`     // ceiling of the requests in flight per model; default 64
	RequestsPerMinute int `json:"requests_per_minute,omitempty"` // ceiling of the pace; 0 = none
	TokensPerMinute   int `json:"tokens_per_minute,omitempty"`   // ceiling of the estimated tokens a minute; 0 = none
	// AdaptiveConcurrency false keeps max_concurrency requests in flight
	// whatever the latency and the 429s; default true.
	AdaptiveConcurrency *bool `json:"adaptive_concurrency,omitempty"`
	// SelfHosted says the model's server is the operator's (llama.cpp,
	// vLLM, Ollama): its concurrency follows the server's queue, else the
	// latency per output token; a hosted API's stays at max_concurrency,
	// lowered by 429s only. Unset, the provider decides (llamacpp and vllm:
	// true; openai: true for a loopback or private base_url).
	SelfHosted *bool `json:"self_hosted,omitempty"`
}

// SpendOptions are the keys of what a model may spend and what it costs.
type SpendOptions struct {
	// MaxCallsPerDay and MaxTokensPerDay cap what the model may spend per
	// UTC day, counted from pgimageai.usage plus calls in flight; 0 = no cap.
	MaxCallsPerDay  int64 `json:"max_calls_per_day,omitempty"`
	MaxTokensPerDay int64 `json:"max_tokens_per_day,omitempty"`
	// Prices in money per million tokens, for pgimageai estimate; 0 = unknown.
	PricePer1MInputTokens  float64 `json:"price_per_1m_input_tokens,omitempty"`
	PricePer1MOutputTokens float64 `json:"price_per_1m_output_tokens,omitempty"`
}

// WithDefaults returns o with every unset key at its default.
func (o Options) WithDefaults() Options {
	if o.Timeout == 0 {
		o.Timeout = Duration(DefaultTimeout)
	}
	if o.MaxRetries == nil {
		n := DefaultMaxRetries
		o.MaxRetries = &n
	}
	if o.MaxConcurrency == 0 {
		o.MaxConcurrency = DefaultMaxConcurrency
	}
	if o.MaxImageBytes == 0 {
		o.MaxImageBytes = DefaultMaxImageBytes
	}
	if o.MaxPromptBytes == 0 {
		o.MaxPromptBytes = DefaultMaxPromptBytes
	}
	if len(o.Formats) == 0 {
		for _, f := range magic.Formats {
			o.Formats = append(o.Formats, f.MIME())
		}
	}
	return o
}

// Validate reports the first invalid shared option.
func (o Options) Validate() error {
	switch {
	case o.Timeout < 0:
		return fmt.Errorf("option timeout: must be positive, got %s", time.Duration(o.Timeout))
	case o.MaxRetries != nil && *o.MaxRetries < 0:
		return fmt.Errorf("option max_retries: must be >= 0, got %d", *o.MaxRetries)
	case o.MaxConcurrency < 0:
		return fmt.Errorf("option max_concurrency: must be >= 1, got %d", o.MaxConcurrency)
	case o.RequestsPerMinute < 0:
		return fmt.Errorf("option requests_per_minute: must be >= 0, got %d", o.RequestsPerMinute)
	case o.TokensPerMinute < 0:
		return fmt.Errorf("option tokens_per_minute: must be >= 0 (0: none), got %d", o.TokensPerMinute)
	case o.MaxImageBytes < 0:
		return fmt.Errorf("option max_image_bytes: must be >= 1, got %d", o.MaxImageBytes)
	case o.MaxPromptBytes < 0:
		return fmt.Errorf("option max_prompt_bytes: must be >= 1, got %d", o.MaxPromptBytes)
	case o.MaxCallsPerDay < 0:
		return fmt.Errorf("option max_calls_per_day: must be >= 0 (0: no cap), got %d", o.MaxCallsPerDay)
	case o.PricePer1MInputTokens < 0 || o.PricePer1MOutputTokens < 0:
		return fmt.Errorf("option price_per_1m_input_tokens / price_per_1m_output_tokens: must be >= 0")
	case o.MaxTokensPerDay < 0:
		return fmt.Errorf("option max_tokens_per_day: must be >= 0 (0: no cap), got %d", o.MaxTokensPerDay)
	}
	if err := o.NormalizeOptions.Validate(); err != nil {
		return err
	}
	for _, m := range o.Formats {
		if _, ok := magic.ParseMIME(m); !ok {
			return fmt.Errorf("option formats: %q is not one of image/png, image/jpeg, image/gif, image/webp", m)
		}
	}
	return nil
}

// Governor returns a new governor of the model's requests (provider/pace):
// max_concurrency is the ceiling of its adaptive concurrency,
// requests_per_minute and tokens_per_minute the ceilings of its pace. Call
// it on options WithDefaults. A hosted model (self_hosted unset or false)
// starts at the ceiling; a self-hosted one from pace.DefaultStart.
func (o Options) Governor() *pace.Governor {
	mode := pace.Hosted
	if o.SelfHosted != nil && *o.SelfHosted {
		mode = pace.SelfHosted
	}
	return pace.New(pace.Config{Ceiling: o.MaxConcurrency, Start: min(pace.DefaultStart, o.MaxConcurrency),
		RequestsPerMinute: o.RequestsPerMinute, TokensPerMinute: o.TokensPerMinute,
		Fixed: o.AdaptiveConcurrency != nil && !*o.AdaptiveConcurrency, Mode: mode})
}

// SelfHostedOr returns o with self_hosted set to def when the operator did
// not set it.
func (o Options) SelfHostedOr(def bool) Options {
	if o.SelfHosted == nil {
		o.SelfHosted = &def
	}
	return o
}

// Allows reports whether format f is among the allowed formats. Call it on
// options WithDefaults.
func (o Options) Allows(f magic.Format) bool {
	for _, m := range o.Formats {
		if m == f.MIME() {
			return true
		}
	}
	return false
}

// ParseOptions decodes the shared keys of raw, ignoring provider-specific
// ones, validates them and applies defaults.
func ParseOptions(raw json.RawMessage) (Options, error) {
	var o Options
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &o); err != nil {
			return Options{}, fmt.Errorf("options: %w", optionError(err, &o))
		}
	}
	if err := o.Validate(); err != nil {
		return Options{}, err
	}
	return o.WithDefaults(), nil
}

// DecodeStrict decodes raw into v, rejecting keys v does not know, so that a
// misspelt option is an error rather than silently ignored. Empty raw leaves v
// untouched.
func DecodeStrict(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("options: %w", optionError(err, v))
	}
	return nil
}

// Duration is a time.Duration that decodes from JSON as a Go duration string
// ("30s", "1m30s") or as a number of seconds (30, 0.5).
type Duration time.Duration

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch x := v.(type) {
	case float64:
		*d = Duration(x * float64(time.Second))
	case string:
		p, err := time.ParseDuration(x)
		if err != nil {
			return fmt.Errorf("duration %q: %w", x, err)
		}
		*d = Duration(p)
	default:
		return fmt.Errorf("duration must be a string like \"30s\" or a number of seconds, got %s", b)
	}
	return nil
}

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// DecodeConfig decodes raw strictly (DecodeStrict) into a new C and
// validates it: the first steps of every provider's ParseConfig, which then
// applies its own defaults.
func DecodeConfig[C interface{ Validate() error }](raw json.RawMessage) (C, error) {
	var c C
	if err := DecodeStrict(raw, &c); err != nil {
		return c, err
	}
	if err := c.Validate(); err != nil {
		return c, err
	}
	return c, nil
}
