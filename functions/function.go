package functions

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/normalize"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/pace"
)

// Name is the SQL name of a function, as written in pgimageai.rules.function.
type Name string

// The functions.
const (
	Complete Name = "AI_IMAGE_COMPLETE" // (model, image, prompt) → text
	Embed    Name = "AI_IMAGE_EMBED"    // (model, image) → real[]
)

// headBytes is how many leading bytes of a bad image the errors table keeps.
const headBytes = 16

// Function is one AI function bound to a model and, for AI_IMAGE_COMPLETE, a
// prompt: what one rule applies to each image. It is safe for concurrent use.
type Function struct {
	name   Name
	model  string // models.name, for messages
	prompt string
	opts   provider.Options
	gen    provider.TextGenerator
	emb    provider.Embedder
	mem    provider.MemoryCoster // nil when calls hold no memory of their own
	par    provider.Parallel     // nil: the model's max_concurrency
	gov    *pace.Governor        // nil: the provider paces nothing
	batch  provider.BatchAPI     // nil unless backfills go through a batch API
	norm   normalize.Settings    // what an image is made into before the call
	input  string                // norm.Fingerprint(), computed once: it changes only with the configuration
}

// Bind checks a rule's arguments against the function's signature and the
// provider's capabilities and returns the bound function. Every failure is an
// *Error with reason invalid_rule and a message that says what to fix.
//
// prompt is nil for SQL NULL. opts are the model's shared options with
// defaults applied (provider.ParseOptions); a provider that has defaults of
// its own (llamacpp leaves WebP out of formats) gives them with an
// Options() method, which takes precedence.
func Bind(name Name, model string, p provider.Provider, opts provider.Options, prompt *string) (*Function, error) {
	if o, ok := p.(interface{ Options() provider.Options }); ok {
		opts = o.Options()
	}
	f := &Function{name: name, model: model, opts: opts, norm: opts.Normalization(p)}
	f.input = f.norm.Fingerprint()
	f.mem, _ = p.(provider.MemoryCoster)
	f.par, _ = p.(provider.Parallel)
	if pp, ok := p.(provider.Paced); ok {
		f.gov = pp.Pace()
	}
	// A model asks for the batch API with its batch_api option; only the
	// chat completions endpoint (AI_IMAGE_COMPLETE) has one here.
	if b, ok := p.(provider.BatchAPI); ok && b.BatchEnabled() && name == Complete {
		f.batch = b
	}
	switch name {
	case Complete:
		if prompt == nil {
			return nil, invalidRule("%s(model, image, prompt) needs a prompt; the rule's prompt is NULL", name)
		}
		gen, ok := p.(provider.TextGenerator)
		if !ok {
			return nil, invalidRule("model %s: its provider cannot generate text from images, so it cannot serve %s", model, name)
		}
		f.prompt, f.gen = *prompt, gen
	case Embed:
		if prompt != nil {
			return nil, invalidRule("%s(model, image) takes no prompt; set the rule's prompt to NULL", name)
		}
		emb, ok := p.(provider.Embedder)
		if !ok {
			return nil, invalidRule("model %s: its provider does not implement image embedding, so it cannot serve %s (use an embedding provider such as local)", model, name)
		}
		f.emb = emb
	default:
		return nil, invalidRule("unknown function %q (want %s or %s)", name, Complete, Embed)
	}
	return f, nil
}

// CallMemory is what a call on img holds in this process beyond the image and
// its request: its normalisation's decode, resize and encode
// (normalize.Memory, 0 for an image sent as stored) and what the provider
// holds (provider.MemoryCoster; 0 for remote providers).
func (f *Function) CallMemory(img []byte) int64 {
	var n int64
	var w, h int
	var reencoded bool
	if format, err := magic.Detect(img); err == nil {
		n, w, h, reencoded = normalize.Estimate(img, format, f.norm) // one header read
	}
	if f.mem == nil {
		return n
	}
	m := f.mem.CallMemory(img)
	if reencoded {
		// The provider decodes the re-encoded image, not img (whose format
		// it may not even read): 8 bytes a pixel of it and a megabyte for
		// its decoder, more than a JPEG or an 8-bit PNG decodes into.
		m = 8*int64(w)*int64(h) + 1<<20
	}
	if n > math.MaxInt64-m {
		return math.MaxInt64
	}
	return n + m
}

// InputVersion names what the function makes of the stored bytes before a
// call: the effective normalisation settings (defaults included) and the
// normalisation's version. A cache of results keys on it beside the
// (function, model, prompt, image bytes): a changed setting is a changed
// input.
// It is computed once, when the function is bound: work.KeyFor asks for it
// on every row.
func (f *Function) InputVersion() string { return f.input }

// Parallelism is how many calls of the function's model can usefully run at
// once: the provider's provider.Parallel (which may follow the model's
// adaptive concurrency), else its max_concurrency.
func (f *Function) Parallelism() int {
	if f.par != nil {
		return max(f.par.Parallelism(), 1)
	}
	return max(f.opts.MaxConcurrency, 1)
}

// Pace is the governor of the model's requests, or nil when its provider
// paces nothing (local).
func (f *Function) Pace() *pace.Governor { return f.gov }

// BatchAPI returns the provider's batch API when the model's backfills go
// through it (its batch_api option, and a function that can use it), else
// nil. pgimageai run and pgimageai estimate both ask here.
func (f *Function) BatchAPI() provider.BatchAPI { return f.batch }

// Name returns the function's SQL name.
func (f *Function) Name() Name { return f.name }

// Result is the value a call writes to the target column. Null is true for a
// SQL NULL; otherwise Text (AI_IMAGE_COMPLETE) or Vector (AI_IMAGE_EMBED) holds
// the value.
type Result struct {
	Null   bool
	Text   string
	Vector []float32
	Usage  provider.Usage
}

// MaxImageBytes is the largest image the function sends (the model's
// max_image_bytes).
func (f *Function) MaxImageBytes() int64 { return f.opts.MaxImageBytes }

// TooLarge is the too_large error of an image of size bytes starting with
// head, for an image whose bytes were never read (a read is
// bounded before it is made).
func (f *Function) TooLarge(size int, head []byte) error {
	format := "image"
	if ft, err := magic.Detect(head); err == nil {
		format = ft.String() + " image"
	}
	return &Error{Reason: TooLarge, ImageBytes: size, ImageHead: head,
		Detail: fmt.Sprintf("%s of %d bytes exceeds max_image_bytes %d of model %s; it was not read", format, size, f.opts.MaxImageBytes, f.model)}
}

// MaxPromptBytes is the longest prompt the function sends (the model's
// max_prompt_bytes).
func (f *Function) MaxPromptBytes() int64 { return f.opts.MaxPromptBytes }

// CheckPrompt returns the too_large error of a prompt longer than
// max_prompt_bytes: one rendered from a template whose columns hold more
// than the model should be sent. nil otherwise.
func (f *Function) CheckPrompt(prompt string) error {
	if int64(len(prompt)) <= f.opts.MaxPromptBytes {
		return nil
	}
	return &Error{Reason: TooLarge, ImageBytes: -1,
		Detail: fmt.Sprintf("prompt of %d bytes (rendered from the rule's template) exceeds max_prompt_bytes %d of model %s", len(prompt), f.opts.MaxPromptBytes, f.model)}
}

// Check validates an image without calling the provider: the NULL, empty,
// format, size and allowed-format rows of the function semantics. It returns the detected
// format, or an *Error.
func (f *Function) Check(img []byte) (magic.Format, error) {
	format, err := magic.Detect(img)
	switch {
	case errors.Is(err, magic.ErrEmpty):
		return 0, &Error{Reason: EmptyImage, Detail: "image is empty (0 bytes)", ImageBytes: 0}
	case err != nil:
		return 0, &Error{Reason: UnknownFormat, ImageBytes: len(img), ImageHead: head(img),
			Detail: fmt.Sprintf("image of %d bytes has no known magic bytes (PNG, JPEG, GIF, WebP, HEIF, AVIF, BMP, TIFF); it starts % x", len(img), head(img))}
	case int64(len(img)) > f.opts.MaxImageBytes:
		return 0, &Error{Reason: TooLarge, ImageBytes: len(img), ImageHead: head(img),
			Detail: fmt.Sprintf("%s image of %d bytes exceeds max_image_bytes %d of model %s", format, len(img), f.opts.MaxImageBytes, f.model)}
	case !f.opts.Allows(format) && !f.norm.Enabled:
		return 0, &Error{Reason: UnsupportedFormat, ImageBytes: len(img), ImageHead: head(img),
			Detail: fmt.Sprintf("model %s accepts %s, not %s, and its normalize option is off", f.model, strings.Join(f.opts.Formats, ", "), format.MIME())}
	}
	return format, nil
}

// Prepare checks img (Check) and returns what the model is sent for it:
// img itself when it needs no normalisation, else its normalised copy.
// Every path that hands an image to a provider goes through it (Call does;
// a Batch API line must too). Errors are *Error values, as Check's.
func (f *Function) Prepare(ctx context.Context, img []byte) (provider.Image, error) {
	format, err := f.Check(img)
	if err != nil {
		return provider.Image{}, err
	}
	return f.normalized(ctx, img, format)
}

// normalized is img made into what the model is sent (package normalize):
// img itself when it needs nothing. A decoder's failure is an
// unsupported_format error naming the decoder; a decode over the byte bound
// too_large; the end of ctx its error.
func (f *Function) normalized(ctx context.Context, img []byte, format magic.Format) (provider.Image, error) {
	r, err := normalize.Image(ctx, img, format, f.norm)
	var de *normalize.DecodeError
	switch {
	case err != nil && ctx.Err() != nil:
		return provider.Image{}, ctx.Err()
	case errors.Is(err, normalize.ErrTooLarge):
		return provider.Image{}, &Error{Reason: TooLarge, ImageBytes: len(img), ImageHead: head(img), Err: err,
			Detail: fmt.Sprintf("model %s: %v; not decoded", f.model, err)}
	case errors.As(err, &de):
		return provider.Image{}, &Error{Reason: UnsupportedFormat, ImageBytes: len(img), ImageHead: head(img), Err: err,
			Detail: fmt.Sprintf("model %s accepts %s; converting the %s image failed: %v", f.model, strings.Join(f.opts.Formats, ", "), format, err)}
	case err != nil:
		return provider.Image{}, &Error{Reason: UnsupportedFormat, ImageBytes: len(img), ImageHead: head(img), Err: err,
			Detail: fmt.Sprintf("model %s: normalising the %s image failed: %v", f.model, format, err)}
	}
	return provider.Image{Data: r.Data, MIME: r.Format.MIME()}, nil
}

// Call applies the function to one image. valid is false for a SQL NULL image,
// which yields a NULL result without a provider call. A failure yields a NULL
// result and an *Error with its reason; the caller records it.
func (f *Function) Call(ctx context.Context, img []byte, valid bool) (Result, error) {
	return f.CallPrompt(ctx, img, valid, f.prompt)
}

// Prompt returns the prompt the function was bound with (a template's source
// text when the rule's prompt names columns).
func (f *Function) Prompt() string { return f.prompt }

// CallPrompt is Call with another prompt: a rule's prompt template rendered
// for one row. AI_IMAGE_EMBED ignores it.
func (f *Function) CallPrompt(ctx context.Context, img []byte, valid bool, prompt string) (Result, error) {
	if !valid {
		return Result{Null: true}, nil
	}
	in, err := f.Prepare(ctx, img)
	if err != nil {
		return Result{Null: true}, err
	}
	switch f.name {
	case Complete:
		c, err := f.gen.GenerateText(ctx, in, prompt)
		if err != nil {
			return Result{Null: true}, f.providerErr(ctx, img, err)
		}
		if err := provider.CheckText(c.Text); err != nil {
			return Result{Null: true, Usage: c.Usage}, fromProvider(f.model, img, err)
		}
		return Result{Text: c.Text, Usage: c.Usage}, nil
	default:
		e, err := f.emb.EmbedImage(ctx, in)
		if err != nil {
			return Result{Null: true}, f.providerErr(ctx, img, err)
		}
		if err := checkVector(e.Vector); err != nil {
			return Result{Null: true, Usage: e.Usage}, fromProvider(f.model, img, err)
		}
		return Result{Vector: e.Vector, Usage: e.Usage}, nil
	}
}

// providerErr classifies a provider failure; a cancelled ctx is returned as is,
// because shutting down is not a property of the row.
func (f *Function) providerErr(ctx context.Context, img []byte, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fromProvider(f.model, img, err)
}

func checkVector(v []float32) error {
	if len(v) == 0 {
		return provider.Errorf(provider.BadResponse, "provider returned an empty vector")
	}
	if err := provider.CheckVectorLength(v); err != nil {
		return err
	}
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return provider.Errorf(provider.BadResponse, "vector element %d is %v", i, x)
		}
	}
	return nil
}

func head(img []byte) []byte { return magic.Head(img, headBytes) }
