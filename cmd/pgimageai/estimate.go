package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"io"
	"math"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/normalize"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/state"
)

// Estimate bounds: a table of up to exactRows rows is read whole; a bigger
// one is sampled (TABLESAMPLE SYSTEM) for about sampleRows images. Only the
// first headerBytes of each image are read: its header gives its size.
const (
	exactRows   = 10000
	sampleRows  = 1000
	headerBytes = 256 << 10
)

// estimate prints what a rule would cost: the calls and input tokens of its
// backfill and per 1,000 new rows, output tokens where usage or max_tokens
// tell, and money where the model has prices. The rule may be disabled.
func estimate(ctx context.Context, c config, stdout, _ io.Writer) error {
	source, target, closeAll, err := connectBoth(ctx, c)
	if err != nil {
		return err
	}
	defer closeAll()
	listed, err := state.AllRules(ctx, source.conn)
	if err != nil {
		return source.explain("read rules", err)
	}
	var rule *state.RuleListing
	for i := range listed {
		if listed[i].Name == c.Query.Rule {
			rule = &listed[i]
		}
	}
	if rule == nil {
		return fmt.Errorf("%w: no rule %q in pgimageai.rules", errUsage, c.Query.Rule)
	}
	models, err := state.Models(ctx, source.conn)
	if err != nil {
		return source.explain("read models", err)
	}
	var model *provider.Model
	for i := range models {
		if models[i].Name == rule.Model {
			model = &models[i]
		}
	}
	if model == nil {
		return fmt.Errorf("rule %s: model %q does not exist", rule.Name, rule.Model)
	}
	opts, err := provider.ParseOptions(model.Options)
	if err != nil {
		return fmt.Errorf("model %s: %w", model.Name, err)
	}
	var extra struct {
		MaxTokens int64 `json:"max_tokens"`
	}
	_ = json.Unmarshal(model.Options, &extra)

	table, err := catalog.Lookup(ctx, source.conn, rule.SourceTable)
	if err != nil {
		return fmt.Errorf("rule %s: source table: %w", rule.Name, err)
	}
	scan, err := scanImages(ctx, source.conn, table, rule.ImageColumn)
	if err != nil {
		return source.explain("read images", err)
	}
	usage, err := state.UsageOfModel(ctx, target.conn, model.Name)
	if err != nil {
		return target.explain("read usage", err)
	}

	reg := registry(c.KeyEnv)
	prov, err := reg.New(*model, os.LookupEnv)
	if err != nil {
		return fmt.Errorf("rule %s cannot run: %w", rule.Name, err)
	}
	e := estimateReport{Rule: *rule, Model: *model, Scan: scan}
	norm := normalizedSizes(prov, opts, &scan)
	e.Norm = &norm
	if tr, ok := provider.ImageTokenRuleOf(prov); ok {
		e.TokenRule = tr.Name
		var sum, stored int64
		for i, sz := range scan.Sizes {
			sum += tr.Tokens(norm.Sizes[i].X, norm.Sizes[i].Y)
			stored += tr.Tokens(sz.X, sz.Y)
		}
		if len(scan.Sizes) > 0 {
			e.InputPerImage = float64(sum) / float64(len(scan.Sizes))
			norm.StoredTokens = float64(stored) / float64(len(scan.Sizes))
		}
	} else if usage.Calls > 0 {
		e.TokenRule = fmt.Sprintf("no documented image rule for %s model %s: the average of its %d answered calls in pgimageai.usage", model.Provider, model.Model, usage.Calls)
		e.InputPerImage = float64(usage.PromptTokens) / float64(usage.Calls)
	} else {
		e.TokenRule = fmt.Sprintf("no documented image rule for %s model %s and no usage yet: tokens unknown", model.Provider, model.Model)
		e.InputPerImage = math.NaN()
	}
	switch {
	case rule.Function != string(functions.Complete):
		e.OutputPerCall = 0
	case usage.Calls > 0:
		e.OutputPerCall, e.OutputFrom = float64(usage.CompletionTokens)/float64(usage.Calls), "the average of pgimageai.usage"
	case extra.MaxTokens > 0:
		e.OutputPerCall, e.OutputFrom = float64(extra.MaxTokens), "max_tokens, an upper bound"
	default:
		e.OutputPerCall = math.NaN()
	}
	e.PriceIn, e.PriceOut = opts.PricePer1MInputTokens, opts.PricePer1MOutputTokens
	// A batch_api model's backfills go through the provider's Batch API, at
	// half the price (https://platform.openai.com/docs/guides/batch); its
	// live changes do not. Whether they do is the bridge's answer: the rule
	// bound as the bridge binds it.
	prompt, _, err := state.RulePrompt(ctx, source.conn, rule.Name)
	if err != nil {
		return source.explain("read the rule's prompt", err)
	}
	fn, err := rules.Bind(reg, os.LookupEnv, *model, rule.Function, prompt)
	if err != nil {
		return fmt.Errorf("rule %s cannot run: %w", rule.Name, err)
	}
	e.BatchBackfill = fn.BatchAPI() != nil
	version, err := rules.VersionOf(*model, rule.Function, prompt)
	if err != nil {
		return fmt.Errorf("rule %s: %w", rule.Name, err)
	}
	live, err := state.RuleLiveVersion(ctx, target.conn, rule.Name)
	if err != nil {
		return target.explain("read the rule's live version", err)
	}
	e.Change = versionChangeOf(*rule, version, live)
	if c.Query.Format == formatJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(e.JSON())
	}
	_, err = io.WriteString(stdout, e.String())
	return err
}

// imageScan is what was read of a source table's images.
type imageScan struct {
	Rows      int64 // rows of the table (exact, or pg_class's estimate when sampled)
	Sampled   bool
	Read      int64         // rows read
	WithImage int64         // of those, with a non-NULL image
	Sizes     []image.Point // of the images whose header could be read
	Bytes     []int64       // their lengths, as stored
	Unknown   int64         // images that are not PNG/JPEG/GIF/WebP, or whose header could not be read: no call
}

// scanImages reads the image headers of table's column: every row of a
// table up to exactRows, else a sample of about sampleRows.
func scanImages(ctx context.Context, conn *pgx.Conn, table *catalog.Table, column string) (imageScan, error) {
	var s imageScan
	var err error
	s.Rows, s.Sampled, err = state.SampleImageHeads(ctx, conn, table.OID, table.Identifier(), column,
		state.ImageSample{ExactRows: exactRows, SampleRows: sampleRows, HeadBytes: headerBytes}, func(head []byte, length int64) error {
			s.Read++
			if head == nil {
				return nil
			}
			s.WithImage++
			format, err := magic.Detect(head)
			if err != nil {
				s.Unknown++
				return nil
			}
			w, h, ok := normalize.Dimensions(head, format)
			if !ok || w <= 0 || h <= 0 {
				s.Unknown++
				return nil
			}
			s.Sizes = append(s.Sizes, image.Pt(w, h))
			s.Bytes = append(s.Bytes, length)
			return nil
		})
	return s, err
}

// estimateReport is the estimate of one rule.
type estimateReport struct {
	Rule          state.RuleListing
	Model         provider.Model
	Scan          imageScan
	TokenRule     string
	InputPerImage float64 // NaN: unknown
	OutputPerCall float64 // NaN: unknown
	OutputFrom    string
	PriceIn       float64 // per 1M tokens; 0: unknown
	PriceOut      float64
	BatchBackfill bool // the backfill goes through OpenAI's Batch API: half price
	Norm          *normEstimate
	Change        *versionChange // the rule's version is not the one its live column holds; nil: it is, or none is recorded
}

func (e estimateReport) String() string {
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
func (e estimateReport) figuresText(f estimateFigures) string {
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
func (e estimateReport) figures(calls float64, batch bool) estimateFigures {
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
	Rule          string          `json:"rule"`
	Function      string          `json:"function"`
	Model         string          `json:"model"`
	Provider      string          `json:"provider"`
	ProviderModel string          `json:"provider_model"`
	SourceRows    int64           `json:"source_rows"`
	Sampled       bool            `json:"sampled"`
	RowsRead      int64           `json:"rows_read"`
	WithImage     int64           `json:"with_image"`
	UnknownFormat int64           `json:"unknown_format"`
	TokenRule     string          `json:"token_rule"`
	Backfill      estimateFigures `json:"backfill"`
	Per1000Rows   estimateFigures `json:"per_1000_rows"`
	// Change is the change of the rule's version that the backfill
	// figures cost; null when the rule's version is the one its live
	// column holds (or none is recorded yet).
	Change *versionChangeJSON `json:"version_change"`
}

// JSON returns the estimate for --format json.
func (e estimateReport) JSON() estimateJSON {
	s := e.Scan
	scale := 1.0
	if s.Sampled && s.Read > 0 {
		scale = float64(s.Rows) / float64(s.Read)
	}
	per1000 := 0.0
	if s.Read > 0 {
		per1000 = 1000 * float64(len(s.Sizes)) / float64(s.Read)
	}
	j := estimateJSON{Rule: e.Rule.Name, Function: e.Rule.Function, Model: e.Model.Name, Provider: e.Model.Provider,
		ProviderModel: e.Model.Model, SourceRows: s.Rows, Sampled: s.Sampled, RowsRead: s.Read, WithImage: s.WithImage,
		UnknownFormat: s.Unknown, TokenRule: e.TokenRule,
		Backfill: e.figures(float64(len(s.Sizes))*scale, e.BatchBackfill), Per1000Rows: e.figures(per1000, false)}
	if e.Change != nil {
		j.Change = e.Change.json(j.Backfill)
	}
	return j
}
