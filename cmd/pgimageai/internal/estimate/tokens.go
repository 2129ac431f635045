package estimate

import (
	"fmt"
	"math"

	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/state"
)

// Tokens fills in r's input tokens an image and output tokens a call: the
// input by the provider's documented image rule (provider.ImageTokenRuleOf)
// on the sizes as sent, else the average of the model's answered calls
// (usage), else unknown; the output, for AI_IMAGE_COMPLETE, from usage,
// else max_tokens (an upper bound), else unknown. r.Norm must be set.
func (r *Report) Tokens(p provider.Provider, usage state.ModelUsage, maxTokens int64) {
	if tr, ok := provider.ImageTokenRuleOf(p); ok {
		r.TokenRule = tr.Name
		var sum, stored int64
		for i, sz := range r.Scan.Sizes {
			sum += tr.Tokens(r.Norm.Sizes[i].X, r.Norm.Sizes[i].Y)
			stored += tr.Tokens(sz.X, sz.Y)
		}
		if n := len(r.Scan.Sizes); n > 0 {
			r.InputPerImage = float64(sum) / float64(n)
			r.Norm.StoredTokens = float64(stored) / float64(n)
		}
	} else if usage.Calls > 0 {
		r.TokenRule = fmt.Sprintf("no documented image rule for %s model %s: the average of its %d answered calls in pgimageai.usage", r.Model.Provider, r.Model.Model, usage.Calls)
		r.InputPerImage = float64(usage.PromptTokens) / float64(usage.Calls)
	} else {
		r.TokenRule = fmt.Sprintf("no documented image rule for %s model %s and no usage yet: tokens unknown", r.Model.Provider, r.Model.Model)
		r.InputPerImage = math.NaN()
	}
	switch {
	case r.Rule.Function != string(functions.Complete):
		r.OutputPerCall = 0
	case usage.Calls > 0:
		r.OutputPerCall, r.OutputFrom = float64(usage.CompletionTokens)/float64(usage.Calls), "the average of pgimageai.usage"
	case maxTokens > 0:
		r.OutputPerCall, r.OutputFrom = float64(maxTokens), "max_tokens, an upper bound"
	default:
		r.OutputPerCall = math.NaN()
	}
}
