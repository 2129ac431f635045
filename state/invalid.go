package state

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// InvalidRule is an enabled rule that cannot run.
type InvalidRule struct {
	Rule, SourceTable, Detail string
}

// ReportInvalidRules makes the open invalid_rule errors rows match invalid:
// ONE open row per invalid rule (source_key {}), its detail kept current, and
// the rows of rules that are valid again or gone resolved — except the rows
// of others, the rules of other groups, which their bridges report. A rule
// reported again with the same detail is left as it is, so restarts add
// nothing.
func ReportInvalidRules(ctx context.Context, conn *pgx.Conn, invalid []InvalidRule, others []string) error {
	names := make([]string, len(invalid))
	b := &pgx.Batch{}
	for i, r := range invalid {
		names[i] = r.Rule
		b.Queue(`INSERT INTO pgimageai.errors AS e (rule, source_table, source_key, reason, detail)
VALUES ($1, $2, '{}', 'invalid_rule', $3)
ON CONFLICT (rule, source_key) WHERE resolved_at IS NULL DO UPDATE SET
  reason = EXCLUDED.reason, detail = EXCLUDED.detail, source_table = EXCLUDED.source_table, attempts = e.attempts + 1
WHERE e.detail IS DISTINCT FROM EXCLUDED.detail OR e.reason <> EXCLUDED.reason`, r.Rule, r.SourceTable, r.Detail)
	}
	b.Queue(`UPDATE pgimageai.errors SET resolved_at = now()
WHERE reason = 'invalid_rule' AND resolved_at IS NULL AND NOT (rule = ANY($1)) AND NOT (rule = ANY($2))`, names, others)
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() })
	if err != nil {
		return fmt.Errorf("report invalid rules: %w", err)
	}
	return nil
}

// RuleKeys is the source keys of one rule's open errors.
type RuleKeys struct {
	Rule string
	Keys []json.RawMessage // source_key JSON, oldest error first
}

// RetryKeys returns, by rule, the keys of the open errors other than
// invalid_rule that match rule and reason ("" matches all).
func RetryKeys(ctx context.Context, conn *pgx.Conn, rule, reason string) ([]RuleKeys, error) {
	rows, _ := conn.Query(ctx, `SELECT rule, jsonb_agg(source_key ORDER BY id) FROM pgimageai.errors
WHERE resolved_at IS NULL AND reason <> 'invalid_rule' AND ($1 = '' OR rule = $1) AND ($2 = '' OR reason = $2)
GROUP BY rule ORDER BY rule`, rule, reason)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RuleKeys, error) {
		var k RuleKeys
		err := r.Scan(&k.Rule, &k.Keys)
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("retry: read open errors: %w", err)
	}
	return out, nil
}
