package main

import (
	"math"
	"strconv"
	"strings"
)

// tokenRule is how a provider counts the input tokens of one image, from its
// pixels, as its documentation gives it.
type tokenRule struct {
	name   string               // says which rule was used, and where it is documented
	tokens func(w, h int) int64 // input tokens of one w × h image
}

// openAITiles is OpenAI's tile rule for detail high (platform.openai.com/
// docs/guides/images-vision, "Calculating costs"): the image is scaled to fit
// within 2048 × 2048, then so that its shortest side is 768 px (both only
// down: the documented examples never scale up), and costs base + tile ×
// the number of 512-px tiles it covers. Detail low costs base alone.
func openAITiles(base, tile int64, w, h int) int64 {
	fw, fh := float64(w), float64(h)
	if fw > 2048 || fh > 2048 {
		s := 2048 / math.Max(fw, fh)
		fw, fh = math.Floor(fw*s), math.Floor(fh*s)
	}
	if short := math.Min(fw, fh); short > 768 {
		s := 768 / short
		fw, fh = math.Floor(fw*s), math.Floor(fh*s)
	}
	tiles := int64(math.Ceil(fw/512)) * int64(math.Ceil(fh/512))
	return base + tile*tiles
}

// tileFamilies are the OpenAI models that count images in 512-px tiles, with
// their base and per-tile tokens (the same page, "GPT-4o, GPT-4.1, GPT-4.5,
// o-series" and "gpt-4o-mini"), longest prefix first.
var tileFamilies = []struct {
	prefix     string
	base, tile int64
}{
	{"gpt-4o-mini", 2833, 5667},
	{"gpt-4o", 85, 170},
	{"gpt-4.1", 85, 170},
	{"gpt-4.5", 85, 170},
	{"chatgpt-4o", 85, 170},
	{"o1", 75, 150},
	{"o3", 75, 150},
}

// imageTokenRule returns the documented rule of a model, or false when there
// is none we follow (then the average of pgimageai.usage is used).
func imageTokenRule(provider, model, detail string) (tokenRule, bool) {
	switch provider {
	case "openai":
		for _, patches := range []string{"gpt-4.1-mini", "gpt-4.1-nano", "o4-mini"} {
			if strings.HasPrefix(model, patches) {
				return tokenRule{}, false // 32-px patches, capped per model: not followed here
			}
		}
		for _, f := range tileFamilies {
			if !strings.HasPrefix(model, f.prefix) {
				continue
			}
			if detail == "low" {
				return tokenRule{name: "OpenAI's rule for " + f.prefix + " at detail low: " + itoa(f.base) + " tokens an image",
					tokens: func(int, int) int64 { return f.base }}, true
			}
			name := "OpenAI's tile rule for " + f.prefix + " at detail high: " + itoa(f.base) + " + " + itoa(f.tile) +
				" per 512-px tile after scaling to fit 2048x2048 and a shortest side of 768"
			if detail != "high" {
				name += " (detail " + orDefault(detail, "unset") + ": the model may choose low; this is the upper bound)"
			}
			return tokenRule{name: name, tokens: func(w, h int) int64 { return openAITiles(f.base, f.tile, w, h) }}, true
		}
	case "voyage":
		return tokenRule{name: "Voyage's rule: 1 token per 560 pixels", tokens: func(w, h int) int64 {
			return int64(math.Ceil(float64(w) * float64(h) / 560))
		}}, true
	}
	return tokenRule{}, false
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
