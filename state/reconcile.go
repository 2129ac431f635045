package state

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/value"
)

// What reconciliation (pgimageai reconcile, and the bridge after partition
// DDL) reads and writes of the bookkeeping.

// Queued is the state of a backfill that reconciliation queued over a range
// of keys: the bridge picks it up at its next check (QueuedBackfills).
const Queued = value.BackfillQueued

// OpenErrorKeys returns which of keys (source_key JSON) have an open errors
// row of rule: a row whose result is NULL for a reason the errors table
// holds has been processed, it is not missing.
func OpenErrorKeys(ctx context.Context, conn *pgx.Conn, rule string, keys []string) (map[string]bool, error) {
	out := map[string]bool{}
	if len(keys) == 0 {
		return out, nil
	}
	rows, _ := conn.Query(ctx, `SELECT k.ord FROM unnest($2::jsonb[]) WITH ORDINALITY AS k(key, ord)
WHERE EXISTS (SELECT FROM pgimageai.errors e WHERE e.rule = $1 AND e.source_key = k.key AND e.resolved_at IS NULL)`, rule, keys)
	var ord int64
	_, err := pgx.ForEachRow(rows, []any{&ord}, func() error {
		out[keys[ord-1]] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("open errors of %s: %w", rule, err)
	}
	return out, nil
}

// ForgetKeys resolves the open row errors (invalid_rule aside) and forgets
// the stored inputs and parked rows of rules for the source rows keyed keys (source_key
// JSON), whose target rows reconciliation deleted: their source rows are
// gone. Run it in the transaction of that delete.
func ForgetKeys(ctx context.Context, tx pgx.Tx, rules, keys []string) error {
	if len(keys) == 0 || len(rules) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `UPDATE pgimageai.errors SET resolved_at = now()
WHERE rule = ANY($1) AND source_key = ANY($2::jsonb[]) AND resolved_at IS NULL AND reason <> 'invalid_rule'`, rules, keys); err != nil {
		return fmt.Errorf("resolve the errors of deleted rows: %w", err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM pgimageai.results WHERE rule = ANY($1) AND source_key = ANY($2::jsonb[])`, rules, keys); err != nil {
		return fmt.Errorf("forget the inputs of deleted rows: %w", err)
	}
	// A row parked while its model is down is gone with its source row.
	if _, err := tx.Exec(ctx, `DELETE FROM pgimageai.parked WHERE rule = ANY($1) AND source_key = ANY($2::jsonb[])`, rules, keys); err != nil {
		return fmt.Errorf("forget the parked rows of deleted rows: %w", err)
	}
	return nil
}

// QueueOutcome is what QueueBackfill did.
type QueueOutcome uint8

// The outcomes of QueueBackfill.
const (
	QueuedNow    QueueOutcome = iota + 1 // the range is queued
	QueueNoRow                           // the rule never backfilled: its first backfill covers every row
	QueueRunning                         // a backfill of the rule runs (or is another computation's): not queued
	QueueChanged                         // the stored range moved meanwhile: read it again and retry
	QueueWidened                         // a queued range was there: the new one is its union
)

func (o QueueOutcome) String() string {
	switch o {
	case QueuedNow:
		return "queued"
	case QueueNoRow:
		return "no_backfill"
	case QueueRunning:
		return "backfill_running"
	case QueueChanged:
		return "changed"
	case QueueWidened:
		return "widened"
	}
	return "invalid"
}

// QueueBackfill queues a backfill of rule (computing fingerprint) over the
// keys after last (nil: from the first) up to stop, both source_key JSON,
// when its backfill is done: the bridge runs it like a resumed backfill.
// prev is the row as the caller read it (LoadBackfill): a queued range is
// replaced by the caller's union of both only when it is still prev's, so
// that two reconciliations never lose each other's range. The batches of
// the finished backfill are given up, so that a Batch API backfill of the
// range collects afresh.
func QueueBackfill(ctx context.Context, conn *pgx.Conn, rule, fingerprint string, prev Backfill, last, stop []byte) (QueueOutcome, error) {
	if prev.Fingerprint != fingerprint || (prev.State != value.BackfillDone && prev.State != Queued) {
		return QueueRunning, nil
	}
	var lastKey any
	if last != nil {
		lastKey = string(last)
	}
	var out QueueOutcome
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := giveUpBatches(ctx, tx, []string{rule}); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE pgimageai.backfills SET state = 'queued', last_key = $3::jsonb, stop_key = $4::jsonb,
  rows_done = 0, rows_total = NULL, started_at = now(), updated_at = now(), finished_at = NULL
WHERE rule = $1 AND fingerprint = $2 AND state = $5
  AND last_key::text IS NOT DISTINCT FROM $6 AND stop_key::text IS NOT DISTINCT FROM $7`,
			rule, fingerprint, lastKey, string(stop), prev.State, nullText(prev.LastKey), nullText(prev.StopKey))
		if err != nil {
			return err
		}
		switch {
		case tag.RowsAffected() == 0:
			out = QueueChanged
		case prev.State == Queued:
			out = QueueWidened
		default:
			out = QueuedNow
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("queue a backfill of %s: %w", rule, err)
	}
	return out, nil
}

func nullText(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// QueuedBackfills returns the rules of names whose backfill is queued, with
// their ranges.
func QueuedBackfills(ctx context.Context, conn *pgx.Conn, names []string) (map[string]Backfill, error) {
	rows, _ := conn.Query(ctx, `SELECT rule, fingerprint, last_key::text, stop_key::text FROM pgimageai.backfills
WHERE rule = ANY($1) AND state = 'queued'`, names)
	out := map[string]Backfill{}
	var rule string
	var b Backfill
	_, err := pgx.ForEachRow(rows, []any{&rule, &b.Fingerprint, &b.LastKey, &b.StopKey}, func() error {
		out[rule] = Backfill{State: Queued, Fingerprint: b.Fingerprint, LastKey: clone(b.LastKey), StopKey: clone(b.StopKey)}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read queued backfills: %w", err)
	}
	return out, nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

// RuleSource returns the OID of the source table that rule's results were
// computed from; found is false when none is recorded.
func RuleSource(ctx context.Context, conn *pgx.Conn, rule string) (oid uint32, found bool, err error) {
	err = conn.QueryRow(ctx, "SELECT source_oid FROM pgimageai.rule_sources WHERE rule = $1", rule).Scan(&oid)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("source of rule %s: %w", rule, err)
	}
	return oid, true, nil
}

// RecordRuleSource records, outside a lane, the source table of a rule
// that has none recorded.
func RecordRuleSource(ctx context.Context, conn *pgx.Conn, rule string, oid uint32) error {
	b := &pgx.Batch{}
	RuleSources{Rules: []string{rule}, OID: oid}.Queue(b)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("record the source of rule %s: %w", rule, err)
	}
	return nil
}

// RuleSources records that the results of Rules are computed from the
// source table OID from here on. It is queued in the target transaction
// that emptied their target of the old table's results.
type RuleSources struct {
	Rules []string
	OID   uint32
}

func (o RuleSources) Queue(b *pgx.Batch) {
	b.Queue(`INSERT INTO pgimageai.rule_sources (rule, source_oid) SELECT r, $2 FROM unnest($1::text[]) AS r
ON CONFLICT (rule) DO UPDATE SET source_oid = EXCLUDED.source_oid, updated_at = now()`, o.Rules, o.OID)
}

// DeleteBackfills deletes the backfill states of rules in a lane's
// transaction, in the lane's order: after the progress of a backfill that
// was routed before it (which would otherwise land on the state of the
// backfill started anew), before the new backfill's own progress. A rule
// without a state backfills from its first row at the next start.
type DeleteBackfills struct{ Rules []string }

func (o DeleteBackfills) Queue(b *pgx.Batch) {
	b.Queue("DELETE FROM pgimageai.backfills WHERE rule = ANY($1)", o.Rules)
}
