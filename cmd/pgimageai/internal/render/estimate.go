package render

import (
	"bytes"
	"fmt"
	"image"
	"math"

	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/state"
)

// ImageScan is what was read of a source table's images.
type ImageScan struct {
	Rows      int64 // rows of the table (exact, or pg_class's estimate when sampled)
	Sampled   bool
	Read      int64         // rows read
	WithImage int64         // of those, with a non-NULL image
	Sizes     []image.Point // of the images whose header could be read
	Bytes     []int64       // their lengths, as stored
	Unknown   int64         // images that are not PNG/JPEG/GIF/WebP, or whose header could not be read: no call
}

// Estimate is the estimate of one rule.
type Estimate struct {
	Rule          state.RuleListing
	Model         provider.Model
	Scan          ImageScan
	TokenRule     string
	InputPerImage float64 // NaN: unknown
	OutputPerCall float64 // NaN: unknown
	OutputFrom    string
	PriceIn       float64 // per 1M tokens; 0: unknown
	PriceOut      float64
	BatchBackfill bool // the backfill goes through OpenAI's Batch API: half price
	Norm          *NormEstimate
	Change        *VersionChange // the rule's version is not the one its live column holds; nil: it is, or none is recorded
}

func (e Estimate) String() string {
	var b bytes.Buffer
	s := e.Scan
	fmt.Fprintf(&b, "Rule %s: %s with model %s (%s %s), %s.%s\n", e.Rule.Name, e.Rule.Function, e.Model.Name,
		e.Model.Provider, e.Model.Model, e.Rule.SourceTable, catalog.QuoteIdent(e.Rule.ImageColumn))
	if s.Sampled {
		fmt.Fprintf(&b, "Source: about %d rows (pg_class estimate); a sample of %d rows was read, %d with an image\n", s.Rows, s.Read, s.WithImage)
	} else {
		fmt.Fprintf(&b, "Source: %d rows, all read, %d with an image\n", s.Rows, s.WithImage)
	}
	if s.Unknown > 0 {
		fmt.Fprintf(&b, "  %d images have no known format (or are unreadable): errors rows, no call\n", s.Unknown)
	}
	fmt.Fprintf(&b, "Tokens: %s\n", e.TokenRule)
	// Calls: the rows with a readable image, scaled from the sample.
	scale := 1.0
	if s.Sampled && s.Read > 0 {
		scale = float64(s.Rows) / float64(s.Read)
	}
	calls := float64(len(s.Sizes)) * scale
	per1000 := 0.0
	if s.Read > 0 {
		per1000 = 1000 * float64(len(s.Sizes)) / float64(s.Read)
	}
	if e.Norm != nil {
		b.WriteString(e.Norm.String())
	}
	backfill := e.figures(calls, e.BatchBackfill)
	fmt.Fprintf(&b, "Backfill: %s\n", e.figuresText(backfill))
	if e.Change != nil {
		b.WriteString(e.Change.text(e.figuresText(backfill)))
	}
	fmt.Fprintf(&b, "Per 1,000 new rows like these: %s\n", e.figuresText(e.figures(per1000, false)))
	return b.String()
}

// figuresText says f: calls, tokens and cost.
func (e Estimate) figuresText(f estimateFigures) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%.0f calls", f.Calls)
	if f.InputTokens == nil {
		b.WriteString(", input tokens unknown")
	} else {
		fmt.Fprintf(&b, ", %.0f input tokens", *f.InputTokens)
	}
	switch {
	case f.OutputTokens == nil:
		b.WriteString(", output tokens unknown")
	case *f.OutputTokens > 0:
		fmt.Fprintf(&b, ", %.0f output tokens (%s)", *f.OutputTokens, e.OutputFrom)
	}
	switch {
	case f.Cost == nil:
	case f.BatchAPI:
		fmt.Fprintf(&b, ", cost %.5f (half the model's price_per_1m_* options: the Batch API)", *f.Cost)
	default:
		fmt.Fprintf(&b, ", cost %.5f (at the model's price_per_1m_* options)", *f.Cost)
	}
	return b.String()
}

// estimateFigures are the calls, tokens and cost of some rows; nil: unknown.
type estimateFigures struct {
	Calls        float64  `json:"calls"`
	InputTokens  *float64 `json:"input_tokens"`
	OutputTokens *float64 `json:"output_tokens"`
	Cost         *float64 `json:"cost"`      // at the model's price_per_1m_* options; nil without prices
	BatchAPI     bool     `json:"batch_api"` // at half the price, through the Batch API
}

// figures returns the tokens and cost of calls.
func (e Estimate) figures(calls float64, batch bool) estimateFigures {
	f := estimateFigures{Calls: math.Round(calls), BatchAPI: batch}
	known := func(v float64) *float64 {
		if math.IsNaN(v) {
			return nil
		}
		v = math.Round(v)
		return &v
	}
	in, out := calls*e.InputPerImage, calls*e.OutputPerCall
	f.InputTokens, f.OutputTokens = known(in), known(out)
	if cost, ok := (provider.Prices{In: e.PriceIn, Out: e.PriceOut}).Cost(in, out); ok {
		if batch {
			cost /= 2
		}
		f.Cost = &cost
	}
	return f
}

// estimateJSON is the estimate as one JSON document, for scripts.
type estimateJSON struct {
	estimateRuleJSON
	estimateSourceJSON
	TokenRule   string          `json:"token_rule"`
	Backfill    estimateFigures `json:"backfill"`
	Per1000Rows estimateFigures `json:"per_1000_rows"`
	// Change is the change of the rule's version that the backfill
	// figures cost; null when the rule's version is the one its live
	// column holds (or none is recorded yet).
	Change *versionChangeJSON `json:"version_change"`
}

// estimateRuleJSON is the rule estimated and its model.
type estimateRuleJSON struct {
	Rule          string `json:"rule"`
	Function      string `json:"function"`
	Model         string `json:"model"`
	Provider      string `json:"provider"`
	ProviderModel string `json:"provider_model"`
}

// estimateSourceJSON is what was read of the source table.
type estimateSourceJSON struct {
	SourceRows    int64 `json:"source_rows"`
	Sampled       bool  `json:"sampled"`
	RowsRead      int64 `json:"rows_read"`
	WithImage     int64 `json:"with_image"`
	UnknownFormat int64 `json:"unknown_format"`
}

// JSON returns the estimate for --format json.
func (e Estimate) JSON() estimateJSON {
	s := e.Scan
	scale := 1.0
	if s.Sampled && s.Read > 0 {
		scale = float64(s.Rows) / float64(s.Read)
	}
	per1000 := 0.0
	if s.Read > 0 {
		per1000 = 1000 * float64(len(s.Sizes)) / float64(s.Read)
	}
	j := estimateJSON{
		estimateRuleJSON: estimateRuleJSON{Rule: e.Rule.Name, Function: e.Rule.Function, Model: e.Model.Name, Provider: e.Model.Provider,
			ProviderModel: e.Model.Model},
		estimateSourceJSON: estimateSourceJSON{SourceRows: s.Rows, Sampled: s.Sampled, RowsRead: s.Read, WithImage: s.WithImage,
			UnknownFormat: s.Unknown},
		TokenRule: e.TokenRule,
		Backfill:  e.figures(float64(len(s.Sizes))*scale, e.BatchBackfill), Per1000Rows: e.figures(per1000, false)}
	if e.Change != nil {
		j.Change = e.Change.json(j.Backfill)
	}
	return j
}
