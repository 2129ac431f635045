package render

import (
	"bytes"
	"fmt"
	"io"

	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/cmd/pgimageai/internal/estimate"
)

// estimateText is the estimate for people.
func estimateText(e estimate.Report) string {
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
	if e.Norm != nil {
		b.WriteString(normText(e.Norm))
	}
	backfill := e.Backfill()
	fmt.Fprintf(&b, "Backfill: %s\n", figuresText(e, backfill))
	if e.Change != nil {
		b.WriteString(changeText(e.Change, figuresText(e, backfill)))
	}
	fmt.Fprintf(&b, "Per 1,000 new rows like these: %s\n", figuresText(e, e.Per1000()))
	return b.String()
}

// figuresText says f: calls, tokens and cost.
func figuresText(e estimate.Report, f estimate.Figures) string {
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

// estimateJSON is the estimate as one JSON document, for scripts.
type estimateJSON struct {
	estimateRuleJSON
	estimateSourceJSON
	TokenRule   string           `json:"token_rule"`
	Backfill    estimate.Figures `json:"backfill"`
	Per1000Rows estimate.Figures `json:"per_1000_rows"`
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

// estimateDocument is the estimate for --format json.
func estimateDocument(e estimate.Report) estimateJSON {
	s := e.Scan
	j := estimateJSON{
		estimateRuleJSON: estimateRuleJSON{Rule: e.Rule.Name, Function: e.Rule.Function, Model: e.Model.Name, Provider: e.Model.Provider,
			ProviderModel: e.Model.Model},
		estimateSourceJSON: estimateSourceJSON{SourceRows: s.Rows, Sampled: s.Sampled, RowsRead: s.Read, WithImage: s.WithImage,
			UnknownFormat: s.Unknown},
		TokenRule: e.TokenRule,
		Backfill:  e.Backfill(), Per1000Rows: e.Per1000()}
	if e.Change != nil {
		j.Change = changeDocument(e.Change, j.Backfill)
	}
	return j
}

// WriteEstimate renders e as format (table or json).
func WriteEstimate(w io.Writer, e estimate.Report, format string) error {
	if format == FormatJSON {
		return JSON(w, estimateDocument(e))
	}
	_, err := io.WriteString(w, estimateText(e))
	return err
}
