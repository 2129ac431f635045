package normalize

import (
	"time"

	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"

	"github.com/pgimageai/pgimageai/magic"
)

// Version names the normalisation's behaviour: a change in what Image makes
// of the same bytes and settings (a filter, an encoder, a rule) changes it,
// so that results made the old way are not taken for the new.
const Version = "normalize/1"

// Defaults.
const (
	DefaultJPEGQuality = 90
	DefaultMaxSide     = 2048
	// DefaultMaxDecodedBytes is the bridge's default byte budget (256 MiB)
	// plus the 64 MiB its memory bound allows beyond it: a normalisation
	// over the budget runs alone, and stays within that bound. A 12 MP HEIC
	// (some 224 MiB) fits; a 12 MP AVIF (some 570) does not.
	DefaultMaxDecodedBytes = 320 << 20
	// DefaultDecodeTimeout bounds the normalisation of one image (its
	// header read, decode, resize and encode): a 12 MP HEIC or 8-bit AVIF
	// took 7 to 10 s of one core of a busy 2-core machine, and the largest
	// AVIF the default byte bound lets through (10 bits, 4:4:4, some 6 MP)
	// about 13.
	DefaultDecodeTimeout = 30 * time.Second
)

// Size is what a model looks at: an image is scaled down, keeping its
// aspect ratio, until it fits every bound that is set (0 = no bound), in
// this order: inside MaxSide × MaxSide, then a shortest side of at most
// MaxShortSide, then at most MaxPixels pixels. An image within every bound
// keeps its size: nothing is ever scaled up.
type Size struct {
	MaxSide      int
	MaxShortSide int
	MaxPixels    int64
}

// The documented size rules of the providers.
var (
	// OpenAIHigh: "detail": "high" (and auto, which may pick it): fit in a
	// 2048 × 2048 square, then a shortest side of 768
	// (https://platform.openai.com/docs/guides/images-vision, "Calculating
	// costs": the image is scaled to fit within 2048×2048, then so that its
	// shortest side is 768px).
	OpenAIHigh = Size{MaxSide: 2048, MaxShortSide: 768}
	// OpenAILow: "detail": "low": the model sees a 512 × 512 version.
	OpenAILow = Size{MaxSide: 512}
	// Voyage: voyage-multimodal-3 reads images of 50,000 to 2,000,000
	// pixels (https://docs.voyageai.com/docs/multimodal-embeddings) and
	// counts a token per 560 pixels.
	Voyage = Size{MaxPixels: 2_000_000}
	// Cohere: Embed v4 downsamples an image of more than 2,458,624 pixels to
	// that size (https://docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-embed-v4.html).
	Cohere = Size{MaxPixels: 2_458_624}
	// MaxSide is the rule of servers that document none (llama.cpp, vLLM,
	// Jina, Ollama): fit in DefaultMaxSide × DefaultMaxSide.
	MaxSide = Size{MaxSide: DefaultMaxSide}
)

// Fit returns the size an image of w × h pixels is scaled to. Both sides
// stay at least 1.
func (s Size) Fit(w, h int) (int, int) {
	if w <= 0 || h <= 0 {
		return w, h
	}
	scale := 1.0
	fw, fh := float64(w), float64(h)
	if s.MaxSide > 0 && max(fw, fh) > float64(s.MaxSide) {
		scale = float64(s.MaxSide) / max(fw, fh)
	}
	if s.MaxShortSide > 0 && min(fw, fh)*scale > float64(s.MaxShortSide) {
		scale = float64(s.MaxShortSide) / min(fw, fh)
	}
	if s.MaxPixels > 0 && fw*fh*scale*scale > float64(s.MaxPixels) {
		scale = math.Sqrt(float64(s.MaxPixels) / (fw * fh))
	}
	if scale >= 1 {
		return w, h
	}
	nw := max(1, int(math.Floor(fw*scale+0.5)))
	nh := max(1, int(math.Floor(fh*scale+0.5)))
	// Rounding may pass a bound by a pixel; take it back.
	for s.MaxPixels > 0 && int64(nw)*int64(nh) > s.MaxPixels && nw > 1 && nh > 1 {
		if nw >= nh {
			nw--
		} else {
			nh--
		}
	}
	return nw, nh
}

// Settings are one model's normalisation. The zero value normalises
// nothing; functions builds it from the model's options.
type Settings struct {
	Enabled bool
	Size    Size
	// Accept are the formats the model is sent as they are (its formats
	// option); anything else is converted to JPEG or PNG, whichever it
	// accepts.
	Accept          []magic.Format
	JPEGQuality     int   // 1–100; 0 = DefaultJPEGQuality
	MaxDecodedBytes int64 // a decode that would allocate more is refused; 0 = DefaultMaxDecodedBytes
	// MaxJPEGScans refuses a JPEG with more scans; 0 = DefaultMaxJPEGScans.
	MaxJPEGScans int
	// DecodeTimeout ends a normalisation that takes longer (a too_large
	// error); 0 = DefaultDecodeTimeout.
	DecodeTimeout time.Duration
}

func (s Settings) decodeTimeout() time.Duration {
	if s.DecodeTimeout <= 0 {
		return DefaultDecodeTimeout
	}
	return s.DecodeTimeout
}

func (s Settings) quality() int {
	if s.JPEGQuality <= 0 {
		return DefaultJPEGQuality
	}
	return min(s.JPEGQuality, 100)
}

func (s Settings) maxDecodedBytes() int64 {
	if s.MaxDecodedBytes <= 0 {
		return DefaultMaxDecodedBytes
	}
	return s.MaxDecodedBytes
}

func (s Settings) accepts(f magic.Format) bool { return slices.Contains(s.Accept, f) }

// Fingerprint names the effective settings (defaults applied) and Version:
// two settings with the same fingerprint make the same bytes of the same
// image. A cache of results keys on it beside the stored bytes.
func (s Settings) Fingerprint() string {
	if !s.Enabled {
		return Version + ":off"
	}
	accept := slices.Clone(s.Accept)
	slices.Sort(accept)
	desc := fmt.Sprintf("%s side=%d short=%d pixels=%d q=%d accept=%v",
		Version, s.Size.MaxSide, s.Size.MaxShortSide, s.Size.MaxPixels, s.quality(), accept)
	sum := sha256.Sum256([]byte(desc))
	return Version + ":" + hex.EncodeToString(sum[:12])
}
