package functions

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pgimageai/pgimageai/provider"
)

// fake is a provider with function fields; a nil field means the capability
// is absent (see textOnly / embedOnly).
type fake struct {
	calls    atomic.Int32
	lastMIME atomic.Value
	text     func(img provider.Image, prompt string) (provider.Completion, error)
	vec      func(img provider.Image) (provider.Embedding, error)
}

type textOnly struct{ *fake }

func (p textOnly) GenerateText(_ context.Context, img provider.Image, prompt string) (provider.Completion, error) {
	p.calls.Add(1)
	p.lastMIME.Store(img.MIME)
	return p.text(img, prompt)
}

type both struct{ textOnly }

func (p both) EmbedImage(_ context.Context, img provider.Image) (provider.Embedding, error) {
	p.calls.Add(1)
	p.lastMIME.Store(img.MIME)
	return p.vec(img)
}

var (
	pngImg  = append([]byte("\x89PNG\r\n\x1a\n"), "\x00\x00\x00\rIHDR"...)
	jpegImg = []byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00")
	gif87   = []byte("GIF87a\x01\x00\x01\x00")
	gif89   = []byte("GIF89a\x01\x00\x01\x00")
	webpImg = []byte("RIFF\x1a\x00\x00\x00WEBPVP8 ")
	wave    = []byte("RIFF\x1a\x00\x00\x00WAVEfmt ")
	// heifHead: an ftyp box of a HEIC and nothing more.
	heifHead = []byte("\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic")
)

func ptr(s string) *string { return &s }

func opts(t testing.TB, raw string) provider.Options {
	t.Helper()
	o, err := provider.ParseOptions([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestCallTable(t *testing.T) {
	okText := func(img provider.Image, prompt string) (provider.Completion, error) {
		return provider.Completion{Text: prompt + " " + img.MIME, Usage: provider.Usage{PromptTokens: 7, CompletionTokens: 3}}, nil
	}
	tests := []struct {
		name      string
		img       []byte
		valid     bool
		options   string
		text      func(provider.Image, string) (provider.Completion, error)
		want      Result
		wantMIME  string
		wantCall  bool
		reason    Reason
		status    int
		imgBytes  int
		detailHas string
	}{
		{name: "null", valid: false, want: Result{Null: true}},
		{name: "empty", img: []byte{}, valid: true, want: Result{Null: true}, reason: EmptyImage, imgBytes: 0},
		{name: "garbage", img: []byte("not an image at all"), valid: true, want: Result{Null: true}, reason: UnknownFormat, imgBytes: 19, detailHas: "6e 6f 74"},
		{name: "riff wave", img: wave, valid: true, want: Result{Null: true}, reason: UnknownFormat, imgBytes: len(wave)},
		{name: "gif88a", img: []byte("GIF88a\x01\x00"), valid: true, want: Result{Null: true}, reason: UnknownFormat, imgBytes: 8},
		{name: "too large", img: pngImg, valid: true, options: `{"max_image_bytes": 10}`, want: Result{Null: true}, reason: TooLarge, imgBytes: len(pngImg), detailHas: "max_image_bytes 10"},
		{name: "exactly max", img: pngImg, valid: true, options: fmt.Sprintf(`{"max_image_bytes": %d}`, len(pngImg)), want: Result{Text: "p image/png", Usage: provider.Usage{PromptTokens: 7, CompletionTokens: 3}}, wantMIME: "image/png", wantCall: true},
		{name: "unsupported format", img: gif89, valid: true, options: `{"formats": ["image/png","image/jpeg"], "normalize": false}`, want: Result{Null: true}, reason: UnsupportedFormat, imgBytes: len(gif89), detailHas: "not image/gif"},
		{name: "unconvertible format", img: gif89, valid: true, options: `{"formats": ["image/png","image/jpeg"]}`, want: Result{Null: true}, reason: UnsupportedFormat, imgBytes: len(gif89), detailHas: "decode GIF with image/gif: gif: reading header"},
		{name: "heif with normalize off", img: heifHead, valid: true, options: `{"normalize": false}`, want: Result{Null: true}, reason: UnsupportedFormat, imgBytes: len(heifHead), detailHas: "not image/heic"},
		{name: "png", img: pngImg, valid: true, want: Result{Text: "p image/png", Usage: provider.Usage{PromptTokens: 7, CompletionTokens: 3}}, wantMIME: "image/png", wantCall: true},
		{name: "jpeg", img: jpegImg, valid: true, want: Result{Text: "p image/jpeg", Usage: provider.Usage{PromptTokens: 7, CompletionTokens: 3}}, wantMIME: "image/jpeg", wantCall: true},
		{name: "gif87a", img: gif87, valid: true, want: Result{Text: "p image/gif", Usage: provider.Usage{PromptTokens: 7, CompletionTokens: 3}}, wantMIME: "image/gif", wantCall: true},
		{name: "gif89a", img: gif89, valid: true, want: Result{Text: "p image/gif", Usage: provider.Usage{PromptTokens: 7, CompletionTokens: 3}}, wantMIME: "image/gif", wantCall: true},
		{name: "webp", img: webpImg, valid: true, want: Result{Text: "p image/webp", Usage: provider.Usage{PromptTokens: 7, CompletionTokens: 3}}, wantMIME: "image/webp", wantCall: true},
		{name: "provider failed for good", img: pngImg, valid: true,
			text: func(provider.Image, string) (provider.Completion, error) {
				return provider.Completion{}, &provider.Error{Kind: provider.Permanent, Status: 400, Message: "invalid image"}
			},
			want: Result{Null: true}, wantMIME: "image/png", wantCall: true, reason: ProviderError, status: 400, imgBytes: len(pngImg), detailHas: "HTTP 400: invalid image"},
		{name: "retries spent", img: pngImg, valid: true,
			text: func(provider.Image, string) (provider.Completion, error) {
				return provider.Completion{}, &provider.Error{Kind: provider.Transient, Status: 503, Message: "overloaded", Attempts: 5}
			},
			want: Result{Null: true}, wantMIME: "image/png", wantCall: true, reason: ProviderError, status: 503, imgBytes: len(pngImg), detailHas: "after 5 attempts"},
		{name: "bad response", img: pngImg, valid: true,
			text: func(provider.Image, string) (provider.Completion, error) {
				return provider.Completion{}, provider.Errorf(provider.BadResponse, "no choices")
			},
			want: Result{Null: true}, wantMIME: "image/png", wantCall: true, reason: BadResponse, imgBytes: len(pngImg), detailHas: "no choices"},
		{name: "over the provider's decoding limits", img: pngImg, valid: true,
			text: func(provider.Image, string) (provider.Completion, error) {
				return provider.Completion{}, provider.Errorf(provider.TooLarge, "PNG image of 50000000x1 pixels: its side is over the limit; not decoded")
			},
			want: Result{Null: true}, wantMIME: "image/png", wantCall: true, reason: TooLarge, imgBytes: len(pngImg), detailHas: "50000000x1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fk := &fake{text: okText}
			if tc.text != nil {
				fk.text = tc.text
			}
			f, err := Bind(Complete, "m1", textOnly{fk}, opts(t, tc.options), ptr("p"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.Call(context.Background(), tc.img, tc.valid)
			if ReasonOf(err) != tc.reason {
				t.Fatalf("reason = %q (err %v), want %q", ReasonOf(err), err, tc.reason)
			}
			if (fk.calls.Load() > 0) != tc.wantCall {
				t.Fatalf("provider calls = %d, want called=%v", fk.calls.Load(), tc.wantCall)
			}
			if tc.wantCall && fk.lastMIME.Load() != tc.wantMIME {
				t.Fatalf("provider got MIME %v, want %s", fk.lastMIME.Load(), tc.wantMIME)
			}
			if got.Null != tc.want.Null || got.Text != tc.want.Text || got.Usage != tc.want.Usage {
				t.Fatalf("result = %+v, want %+v", got, tc.want)
			}
			if tc.reason == "" {
				return
			}
			var fe *Error
			errors.As(err, &fe)
			if fe.Status != tc.status || fe.ImageBytes != tc.imgBytes {
				t.Fatalf("status %d bytes %d, want %d %d", fe.Status, fe.ImageBytes, tc.status, tc.imgBytes)
			}
			if wantHead := tc.img[:min(len(tc.img), 16)]; !bytes.Equal(fe.ImageHead, wantHead) {
				t.Fatalf("head = %x, want %x", fe.ImageHead, wantHead)
			}
			if !strings.Contains(fe.Detail, tc.detailHas) {
				t.Fatalf("detail %q lacks %q", fe.Detail, tc.detailHas)
			}
		})
	}
}

func TestEmbed(t *testing.T) {
	tests := []struct {
		name   string
		vec    []float32
		reason Reason
	}{
		{"vector", []float32{0.6, 0.8}, ""},
		{"empty vector", nil, BadResponse},
		{"nan", []float32{0.1, float32NaN()}, BadResponse},
		{"longest vector", make([]float32, provider.MaxDimensions), ""},
		{"vector over the limit", make([]float32, provider.MaxDimensions+1), BadResponse},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fk := &fake{vec: func(provider.Image) (provider.Embedding, error) { return provider.Embedding{Vector: tc.vec}, nil }}
			f, err := Bind(Embed, "e1", both{textOnly{fk}}, opts(t, ""), nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.Call(context.Background(), webpImg, true)
			if ReasonOf(err) != tc.reason {
				t.Fatalf("reason %q (%v), want %q", ReasonOf(err), err, tc.reason)
			}
			if tc.reason == "" && (got.Null || len(got.Vector) != len(tc.vec)) {
				t.Fatalf("result %+v", got)
			}
			if tc.reason != "" && !got.Null {
				t.Fatalf("failed call must give NULL, got %+v", got)
			}
			// NULL image: no call.
			before := fk.calls.Load()
			if r, err := f.Call(context.Background(), nil, false); err != nil || !r.Null || fk.calls.Load() != before {
				t.Fatalf("NULL image: %+v %v calls %d→%d", r, err, before, fk.calls.Load())
			}
		})
	}
}

// TestAnswerTextBounded: a text over provider.MaxTextBytes, from any
// provider, is a bad_response and nothing is written.
func TestAnswerTextBounded(t *testing.T) {
	tests := []struct {
		name   string
		n      int
		reason Reason
	}{
		{"at the limit", provider.MaxTextBytes, ""},
		{"over the limit", provider.MaxTextBytes + 1, BadResponse},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fk := &fake{text: func(provider.Image, string) (provider.Completion, error) {
				return provider.Completion{Text: strings.Repeat("a", tc.n)}, nil
			}}
			f, err := Bind(Complete, "c1", textOnly{fk}, opts(t, ""), ptr("p"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.Call(context.Background(), pngImg, true)
			if ReasonOf(err) != tc.reason || got.Null != (tc.reason != "") {
				t.Fatalf("result null=%v, reason %q (%v), want %q", got.Null, ReasonOf(err), err, tc.reason)
			}
		})
	}
}

func float32NaN() float32 { var z float32; return z / z }

func TestBind(t *testing.T) {
	fk := &fake{}
	tests := []struct {
		name    string
		fn      Name
		p       provider.Provider
		prompt  *string
		wantErr string
	}{
		{"complete ok", Complete, textOnly{fk}, ptr("describe"), ""},
		{"complete empty prompt ok", Complete, textOnly{fk}, ptr(""), ""},
		{"complete without prompt", Complete, textOnly{fk}, nil, "needs a prompt"},
		{"embed with prompt", Embed, both{textOnly{fk}}, ptr("x"), "takes no prompt"},
		{"embed on text-only provider", Embed, textOnly{fk}, nil, "does not implement image embedding"},
		{"complete on embed-less thing", Complete, struct{}{}, ptr("x"), "cannot generate text"},
		{"unknown function", Name("AI_IMAGE_SHOUT"), textOnly{fk}, nil, "unknown function"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Bind(tc.fn, "m", tc.p, opts(t, ""), tc.prompt)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if ReasonOf(err) != InvalidRule || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want invalid_rule containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestCancelledCallIsNotARowError(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	fk := &fake{text: func(provider.Image, string) (provider.Completion, error) {
		return provider.Completion{}, &provider.Error{Kind: provider.Transient, Message: "context canceled", Err: context.Canceled}
	}}
	f, _ := Bind(Complete, "m", textOnly{fk}, opts(t, ""), ptr("p"))
	_, err := f.Call(ctx, pngImg, true)
	if !errors.Is(err, context.Canceled) || ReasonOf(err) != "" {
		t.Fatalf("err = %v (reason %q), want bare context.Canceled", err, ReasonOf(err))
	}
}

// withOptions is an embedder with option defaults of its own, as llamacpp
// leaves WebP out of its formats.
type withOptions struct {
	both
	o provider.Options
}

func (p withOptions) Options() provider.Options { return p.o }

func TestBindTakesTheProvidersOptions(t *testing.T) {
	fk := &fake{vec: func(provider.Image) (provider.Embedding, error) {
		return provider.Embedding{Vector: []float32{1}}, nil
	}}
	p := withOptions{both{textOnly{fk}}, opts(t, `{"formats":["image/png","image/jpeg","image/gif"]}`)}
	f, err := Bind(Embed, "m", p, opts(t, ""), nil) // the row's options allow all four
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Call(context.Background(), webpImg, true); ReasonOf(err) != UnsupportedFormat {
		t.Fatalf("WebP: err = %v, want unsupported_format", err)
	}
	if _, err := f.Call(context.Background(), pngImg, true); err != nil {
		t.Fatalf("PNG: %v", err)
	}
	if n := fk.calls.Load(); n != 1 {
		t.Fatalf("provider calls = %d, want 1 (the PNG)", n)
	}
}

func TestCheckPrompt(t *testing.T) {
	tests := []struct {
		name    string
		options string
		prompt  string
		wantErr bool
	}{
		{name: "default bound, short prompt", prompt: "Describe the image"},
		{name: "default bound is 64 KiB", prompt: strings.Repeat("x", 64<<10)},
		{name: "over the default bound", prompt: strings.Repeat("x", 64<<10+1), wantErr: true},
		{name: "at a bound of its own", options: `{"max_prompt_bytes": 10}`, prompt: "0123456789"},
		{name: "over a bound of its own", options: `{"max_prompt_bytes": 10}`, prompt: "0123456789a", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Bind(Complete, "m1", textOnly{&fake{}}, opts(t, tc.options), ptr("p"))
			if err != nil {
				t.Fatal(err)
			}
			err = f.CheckPrompt(tc.prompt)
			if (err != nil) != tc.wantErr {
				t.Fatalf("CheckPrompt: %v, want error %v", err, tc.wantErr)
			}
			if err != nil && (ReasonOf(err) != TooLarge || !strings.Contains(err.Error(), "max_prompt_bytes")) {
				t.Errorf("error %v: want too_large naming max_prompt_bytes", err)
			}
		})
	}
}
