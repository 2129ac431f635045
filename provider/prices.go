package provider

import (
	"encoding/json"
	"math"
)

// Prices are a model's price_per_1m_input_tokens and
// price_per_1m_output_tokens options: money per million tokens; 0: unknown.
type Prices struct {
	In, Out float64
	// BatchAPI: the model's backfills may go through a batch API
	// (batch_api), whose answers cost half.
	BatchAPI bool
}

// PricesOf returns the prices of m; none when its options do not parse
// (an invalid model is reported with its rules).
func PricesOf(m Model) Prices {
	opts, err := ParseOptions(m.Options)
	if err != nil {
		return Prices{}
	}
	var batch struct {
		BatchAPI bool `json:"batch_api"`
	}
	_ = json.Unmarshal(m.Options, &batch)
	return Prices{In: opts.PricePer1MInputTokens, Out: opts.PricePer1MOutputTokens, BatchAPI: batch.BatchAPI}
}

// Cost returns the money of in input and out output tokens at the full
// price. ok is false without an input price or when the input tokens are
// unknown (NaN); unknown output tokens, or no output price, add nothing.
func (p Prices) Cost(in, out float64) (money float64, ok bool) {
	if p.In <= 0 || math.IsNaN(in) {
		return 0, false
	}
	money = in * p.In / 1e6
	if p.Out > 0 && !math.IsNaN(out) {
		money += out * p.Out / 1e6
	}
	return money, true
}
