package estimate

import (
	"math"

	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/state"
)

// Report is the estimate of one rule.
type Report struct {
	Rule          state.RuleListing
	Model         provider.Model
	Scan          Scan
	TokenRule     string
	InputPerImage float64 // NaN: unknown
	OutputPerCall float64 // NaN: unknown
	OutputFrom    string
	PriceIn       float64 // per 1M tokens; 0: unknown
	PriceOut      float64
	BatchBackfill bool // the backfill goes through OpenAI's Batch API: half price
	Norm          *Norm
	Change        *VersionChange // the rule's version is not the one its live column holds; nil: it is, or none is recorded
}

// Figures are the calls, tokens and cost of some rows; nil: unknown. Their
// JSON is estimate's backfill and per_1000_rows.
type Figures struct {
	Calls        float64  `json:"calls"`
	InputTokens  *float64 `json:"input_tokens"`
	OutputTokens *float64 `json:"output_tokens"`
	Cost         *float64 `json:"cost"`      // at the model's price_per_1m_* options; nil without prices
	BatchAPI     bool     `json:"batch_api"` // at half the price, through the Batch API
}

// Backfill is the figures of the rule's backfill: the rows with a readable
// image, scaled from the sample to the table.
func (r Report) Backfill() Figures {
	s := r.Scan
	scale := 1.0
	if s.Sampled && s.Read > 0 {
		scale = float64(s.Rows) / float64(s.Read)
	}
	return r.figures(float64(len(s.Sizes))*scale, r.BatchBackfill)
}

// Per1000 is the figures of 1,000 new rows like those read, called live
// (never through a batch API).
func (r Report) Per1000() Figures {
	s := r.Scan
	per1000 := 0.0
	if s.Read > 0 {
		per1000 = 1000 * float64(len(s.Sizes)) / float64(s.Read)
	}
	return r.figures(per1000, false)
}

// figures returns the tokens and cost of calls.
func (r Report) figures(calls float64, batch bool) Figures {
	f := Figures{Calls: math.Round(calls), BatchAPI: batch}
	known := func(v float64) *float64 {
		if math.IsNaN(v) {
			return nil
		}
		v = math.Round(v)
		return &v
	}
	in, out := calls*r.InputPerImage, calls*r.OutputPerCall
	f.InputTokens, f.OutputTokens = known(in), known(out)
	if cost, ok := (provider.Prices{In: r.PriceIn, Out: r.PriceOut}).Cost(in, out); ok {
		if batch {
			cost /= 2
		}
		f.Cost = &cost
	}
	return f
}
