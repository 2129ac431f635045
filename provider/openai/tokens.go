package openai

import (
	"math"
	"strconv"
	"strings"

	"github.com/pgimageai/pgimageai/provider"
)

// TileRule is how one family of OpenAI models counts the input tokens of an
// image: base + tile × the 512-px tiles the image covers at detail high,
// base alone at detail low.
type TileRule struct {
	Family     string // the model id prefix, e.g. "gpt-4o"
	Base, Tile int64
}

// tileFamilies are the OpenAI models that count images in 512-px tiles, with
// their base and per-tile tokens (https://platform.openai.com/docs/guides/
// images-vision, "Calculating costs": "GPT-4o, GPT-4.1, GPT-4.5, o-series"
// and "gpt-4o-mini"), longest prefix first.
var tileFamilies = []TileRule{
	{"gpt-4o-mini", 2833, 5667},
	{"gpt-4o", 85, 170},
	{"gpt-4.1", 85, 170},
	{"gpt-4.5", 85, 170},
	{"chatgpt-4o", 85, 170},
	{"o1", 75, 150},
	{"o3", 75, 150},
}

// RuleOf returns the tile rule of model, or false when it has none we follow
// (the 32-px patch models gpt-4.1-mini, gpt-4.1-nano and o4-mini, and every
// model not served by OpenAI's rules).
func RuleOf(model string) (TileRule, bool) {
	for _, patches := range []string{"gpt-4.1-mini", "gpt-4.1-nano", "o4-mini"} {
		if strings.HasPrefix(model, patches) {
			return TileRule{}, false
		}
	}
	for _, f := range tileFamilies {
		if strings.HasPrefix(model, f.Family) {
			return f, true
		}
	}
	return TileRule{}, false
}

// Tokens is the rule's count for a w × h image at detail: the image is
// scaled to fit within 2048 × 2048, then so that its shortest side is 768 px
// (both only down: the documented examples never scale up), and costs base
// + tile × the number of 512-px tiles it covers. Detail low costs base
// alone; auto or unset may choose high, which is counted.
func (r TileRule) Tokens(detail string, w, h int) int64 {
	if detail == "low" {
		return r.Base
	}
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
	return r.Base + r.Tile*tiles
}

// String names the rule as estimate shows it.
func (r TileRule) String(detail string) string {
	if detail == "low" {
		return "OpenAI's rule for " + r.Family + " at detail low: " + strconv.FormatInt(r.Base, 10) + " tokens an image"
	}
	name := "OpenAI's tile rule for " + r.Family + " at detail high: " + strconv.FormatInt(r.Base, 10) + " + " +
		strconv.FormatInt(r.Tile, 10) + " per 512-px tile after scaling to fit 2048x2048 and a shortest side of 768"
	if detail != "high" {
		if detail == "" {
			detail = "unset"
		}
		name += " (detail " + detail + ": the model may choose low; this is the upper bound)"
	}
	return name
}

// ImageTokenRule is the tile rule of the provider's model at its detail
// option (provider.ImageTokenCounter); false for a model without one.
func (p *Provider) ImageTokenRule() (provider.TokenRule, bool) {
	r, ok := RuleOf(p.model)
	if !ok {
		return provider.TokenRule{}, false
	}
	detail := p.cfg.Detail
	return provider.TokenRule{Name: r.String(detail), Tokens: func(w, h int) int64 { return r.Tokens(detail, w, h) }}, true
}
