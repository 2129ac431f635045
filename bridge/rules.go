package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/sink"
)

// byteaOID is the type OID of bytea.
const byteaOID = 17

// ruleRow is one row of pgimageai.rules joined with its model.
type ruleRow struct {
	Name, SourceTable, ImageColumn, Function string
	Prompt                                   *string
	TargetTable, TargetColumn                string
	Model                                    provider.Model
}

// Rule is a validated, enabled rule bound to its function, source and target.
// It is immutable once loaded.
type Rule struct {
	Name        string
	Source      *catalog.Table
	ImageColumn string
	Fn          *functions.Function
	Model       string
	Prompt      string
	Target      *sink.Target
	KeyColumns  []sink.KeyColumn
}

// InvalidRule is an enabled rule that cannot run, and why.
type InvalidRule struct {
	Name        string
	SourceTable string
	Err         error
}

// loadRuleRows reads the enabled rules and their models from the source
// database.
func loadRuleRows(ctx context.Context, src *pgx.Conn) ([]ruleRow, error) {
	rows, err := src.Query(ctx, `
SELECT r.name, r.source_table, r.image_column, r.function, r.prompt, r.target_table, r.target_column,
       m.name, m.provider, coalesce(m.base_url, ''), m.model, coalesce(m.api_key_env, ''), m.options
FROM pgimageai.rules r JOIN pgimageai.models m ON m.name = r.model
WHERE r.enabled
ORDER BY r.name`)
	if err != nil {
		return nil, fmt.Errorf("load rules: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (ruleRow, error) {
		var rr ruleRow
		var opts []byte
		err := r.Scan(&rr.Name, &rr.SourceTable, &rr.ImageColumn, &rr.Function, &rr.Prompt, &rr.TargetTable, &rr.TargetColumn,
			&rr.Model.Name, &rr.Model.Provider, &rr.Model.BaseURL, &rr.Model.Model, &rr.Model.APIKeyEnv, &opts)
		rr.Model.Options = json.RawMessage(opts)
		return rr, err
	})
}

// compile validates one rule row: its model's provider and options, the
// function's arguments and capabilities, the source table and image column,
// and the target table, which it creates or validates. providers caches one
// provider per model so that rules sharing a model share its limits.
func compile(ctx context.Context, src, tgt *pgx.Conn, reg *provider.Registry, env provider.Env, providers map[string]provider.Provider, rr ruleRow) (*Rule, error) {
	p, ok := providers[rr.Model.Name]
	if !ok {
		var err error
		if p, err = reg.New(rr.Model, env); err != nil {
			return nil, err
		}
		providers[rr.Model.Name] = p
	}
	opts, err := provider.ParseOptions(rr.Model.Options)
	if err != nil {
		return nil, fmt.Errorf("model %q: %w", rr.Model.Name, err)
	}
	fn, err := functions.Bind(functions.Name(rr.Function), rr.Model.Name, p, opts, rr.Prompt)
	if err != nil {
		return nil, err
	}
	source, err := catalog.Lookup(ctx, src, rr.SourceTable)
	if err != nil {
		return nil, fmt.Errorf("source table: %w", err)
	}
	col, ok := source.Column(rr.ImageColumn)
	switch {
	case !ok:
		return nil, fmt.Errorf("source table %s has no column %q (column names are exact case)", source, rr.ImageColumn)
	case col.TypeOID != byteaOID:
		return nil, fmt.Errorf("image column %s.%s is %s, not bytea", source, pgx.Identifier{rr.ImageColumn}.Sanitize(), col.Type)
	case len(source.PrimaryKey) == 0:
		return nil, fmt.Errorf("source table %s has no primary key; add one so results can be keyed", source)
	}
	if t, err := catalog.Lookup(ctx, tgt, rr.TargetTable); err == nil && t.OID == source.OID && sameDatabase(src, tgt) {
		return nil, fmt.Errorf("target %s is the source table itself (write-back) — not supported by this version", t)
	}
	typ := sink.TextResult
	if fn.Name() == functions.Embed {
		typ = sink.VectorResult
	}
	target, err := sink.Ensure(ctx, tgt, rr.TargetTable, source, rr.TargetColumn, typ)
	if err != nil {
		return nil, err
	}
	r := &Rule{Name: rr.Name, Source: source, ImageColumn: rr.ImageColumn, Fn: fn, Model: rr.Model.Name, Target: target}
	if rr.Prompt != nil {
		r.Prompt = *rr.Prompt
	}
	for _, k := range source.PrimaryKey {
		c, _ := source.Column(k)
		r.KeyColumns = append(r.KeyColumns, sink.KeyColumn{Name: c.Name, TypeOID: c.TypeOID})
	}
	return r, nil
}

// sameDatabase reports whether two connections reach the same database.
func sameDatabase(a, b *pgx.Conn) bool {
	ca, cb := a.Config(), b.Config()
	return ca.Host == cb.Host && ca.Port == cb.Port && ca.Database == cb.Database
}

// loadRules loads, validates and compiles every enabled rule. Rules whose
// target tables clash (one target table fed by two source tables) are invalid.
func loadRules(ctx context.Context, src, tgt *pgx.Conn, reg *provider.Registry, env provider.Env) ([]*Rule, []InvalidRule, error) {
	rows, err := loadRuleRows(ctx, src)
	if err != nil {
		return nil, nil, err
	}
	var valid []*Rule
	var invalid []InvalidRule
	providers := map[string]provider.Provider{}
	sourceOf := map[string]uint32{} // target table → source table OID
	for _, rr := range rows {
		r, err := compile(ctx, src, tgt, reg, env, providers, rr)
		if err == nil {
			if oid, ok := sourceOf[r.Target.Name()]; ok && oid != r.Source.OID {
				err = fmt.Errorf("target table %s is already fed by another source table; a target row is keyed by one source table's primary key", r.Target.Name())
			} else {
				sourceOf[r.Target.Name()] = r.Source.OID
			}
		}
		if err != nil {
			var pgErr interface{ SQLState() string }
			if src.IsClosed() || tgt.IsClosed() || errors.As(err, &pgErr) && isConnectionLevel(pgErr.SQLState()) {
				return nil, nil, fmt.Errorf("rule %s: %w", rr.Name, err)
			}
			invalid = append(invalid, InvalidRule{Name: rr.Name, SourceTable: rr.SourceTable, Err: err})
			continue
		}
		valid = append(valid, r)
	}
	return valid, invalid, nil
}

// isConnectionLevel reports SQLSTATE classes that are about the connection or
// server, not the rule: connection exceptions (08), operator intervention
// (57), system errors (58) and insufficient resources (53).
func isConnectionLevel(code string) bool {
	if len(code) < 2 {
		return false
	}
	switch code[:2] {
	case "08", "53", "57", "58":
		return true
	}
	return false
}
