package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/cmd/pgimageai/internal/estimate"
	"github.com/pgimageai/pgimageai/cmd/pgimageai/internal/render"
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

// estimateCommand prints what a rule would cost: the calls and input tokens of its
// backfill and per 1,000 new rows, output tokens where usage or max_tokens
// tell, and money where the model has prices. The rule may be disabled.
func estimateCommand(ctx context.Context, c config, stdout, _ io.Writer) error {
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
	e := estimate.Report{Rule: *rule, Model: *model, Scan: scan}
	norm := estimate.Normalized(prov, opts, scan)
	e.Norm = &norm
	e.Tokens(prov, usage, extra.MaxTokens)
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
	e.Change = estimate.ChangeOf(*rule, version, live)
	return render.WriteEstimate(stdout, e, c.Query.Format)
}

// scanImages reads the image headers of table's column: every row of a
// table up to exactRows, else a sample of about sampleRows.
func scanImages(ctx context.Context, conn *pgx.Conn, table *catalog.Table, column string) (estimate.Scan, error) {
	var s estimate.Scan
	var err error
	s.Rows, s.Sampled, err = state.SampleImageHeads(ctx, conn, table.OID, table.Identifier(), column,
		state.ImageSample{ExactRows: exactRows, SampleRows: sampleRows, HeadBytes: headerBytes}, func(head []byte, length int64) error {
			s.Add(head, length)
			return nil
		})
	return s, err
}
