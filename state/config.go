package state

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/value"
)

// RuleRow is one row of pgimageai.rules.
type RuleRow struct {
	Name, SourceTable, ImageColumn, Function, Model string
	Prompt                                          *string
	TargetTable, TargetColumn                       string
	Enabled                                         bool
	// Switch is how a change of version applies: "versioned", "in_place",
	// or "" (the function's default).
	Switch string
}

// Models reads every row of pgimageai.models. Options are re-encoded the way
// options read from the WAL are, so that an unchanged model compares equal.
func Models(ctx context.Context, conn *pgx.Conn) ([]value.Model, error) {
	rows, _ := conn.Query(ctx, `SELECT name, provider, coalesce(base_url, ''), model, coalesce(api_key_env, ''), options FROM pgimageai.models`)
	models, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (value.Model, error) {
		var m value.Model
		var opts map[string]any
		if err := r.Scan(&m.Name, &m.Provider, &m.BaseURL, &m.Model, &m.APIKeyEnv, &opts); err != nil {
			return m, err
		}
		var err error
		m.Options, err = json.Marshal(opts)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("load models: %w", err)
	}
	return models, nil
}

// Rules reads the rules of group (only the enabled ones when enabledOnly),
// in name order.
func Rules(ctx context.Context, conn *pgx.Conn, group string, enabledOnly bool) ([]RuleRow, error) {
	rows, _ := conn.Query(ctx, `SELECT name, source_table, image_column, function, model, prompt, target_table, target_column, enabled, coalesce(switch, '')
FROM pgimageai.rules WHERE rule_group = $1 AND (enabled OR NOT $2) ORDER BY name`, group, enabledOnly)
	rules, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RuleRow, error) {
		var rr RuleRow
		err := r.Scan(&rr.Name, &rr.SourceTable, &rr.ImageColumn, &rr.Function, &rr.Model, &rr.Prompt, &rr.TargetTable, &rr.TargetColumn, &rr.Enabled, &rr.Switch)
		return rr, err
	})
	if err != nil {
		return nil, fmt.Errorf("load rules: %w", err)
	}
	return rules, nil
}

// OtherGroupsRules returns the names of the rules of every group but group.
func OtherGroupsRules(ctx context.Context, conn *pgx.Conn, group string) ([]string, error) {
	var names []string
	if err := conn.QueryRow(ctx, "SELECT coalesce(array_agg(name), '{}') FROM pgimageai.rules WHERE rule_group <> $1", group).Scan(&names); err != nil {
		return nil, fmt.Errorf("read the rules of other groups: %w", err)
	}
	return names, nil
}

// TableOIDs returns the OIDs of pgimageai.rules, pgimageai.models and
// pgimageai.retry_requests, whose changes the bridge reads from the WAL.
func TableOIDs(ctx context.Context, conn *pgx.Conn) (rules, models, retries uint32, err error) {
	err = conn.QueryRow(ctx, "SELECT 'pgimageai.rules'::regclass::oid, 'pgimageai.models'::regclass::oid, 'pgimageai.retry_requests'::regclass::oid").
		Scan(&rules, &models, &retries)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("pgimageai.rules, models and retry_requests: %w", err)
	}
	return rules, models, retries, nil
}

// RulesEnabled reports whether one of the rules names exists and is
// enabled now.
func RulesEnabled(ctx context.Context, conn *pgx.Conn, names []string) (bool, error) {
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pgimageai.rules WHERE name = ANY($1) AND enabled)", names).Scan(&ok); err != nil {
		return false, fmt.Errorf("read rules: %w", err)
	}
	return ok, nil
}
