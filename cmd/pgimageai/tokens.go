package main

import (
	"math"
	"strconv"

	"github.com/pgimageai/pgimageai/provider/openai"
)

// tokenRule is how a provider counts the input tokens of one image, from its
// pixels, as its documentation gives it.
type tokenRule struct {
	name   string               // says which rule was used, and where it is documented
	tokens func(w, h int) int64 // input tokens of one w × h image
}

// imageTokenRule returns the documented rule of a model, or false when there
// is none we follow (then the average of pgimageai.usage is used).
func imageTokenRule(provider, model, detail string) (tokenRule, bool) {
	switch provider {
	case "openai":
		r, ok := openai.RuleOf(model)
		if !ok {
			return tokenRule{}, false
		}
		return tokenRule{name: r.String(detail), tokens: func(w, h int) int64 { return r.Tokens(detail, w, h) }}, true
	case "voyage":
		return tokenRule{name: "Voyage's rule: 1 token per 560 pixels", tokens: func(w, h int) int64 {
			return int64(math.Ceil(float64(w) * float64(h) / 560))
		}}, true
	}
	return tokenRule{}, false
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
