package bridge

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/replication"
)

// retryFilter is a retry request's filters; "" matches everything.
type retryFilter struct {
	Rule   string
	Reason string
}

// retryRequest handles a row inserted into pgimageai.retry_requests, which
// `pgimageai retry` writes: only roles granted INSERT on it (operators) can
// ask the bridge to pay for calls again (SPEC §5b).
func (e *engine) retryRequest(ctx context.Context, ch *replication.Change) error {
	r := tupleReader{e.typeMap, ch.Relation, ch.New}
	var f retryFilter
	var err error
	if f.Rule, err = r.text("rule"); err != nil {
		return fmt.Errorf("retry request at %s: %w", ch.LSN, err)
	}
	if f.Reason, err = r.text("reason"); err != nil {
		return fmt.Errorf("retry request at %s: %w", ch.LSN, err)
	}
	return e.retry(ctx, f, ch.LSN)
}

// retry reprocesses, inside the request's transaction, the current source
// rows behind the open errors (other than invalid_rule) that match the
// filter. A row that no longer exists has its errors resolved.
func (e *engine) retry(ctx context.Context, f retryFilter, lsn replication.LSN) error {
	// Read first, on connections that may need to be re-established, and
	// only then add the items: a failed read is simply read again.
	type retryRows struct {
		rule  *Rule
		keys  []json.RawMessage
		found []pageRow
	}
	var todo []retryRows
	err := e.live.retrying(ctx, "reading the rows to retry", func() error {
		todo = todo[:0]
		rows, err := e.live.tgt.Query(ctx, `SELECT rule, jsonb_agg(source_key) FROM pgimageai.errors
WHERE resolved_at IS NULL AND reason <> 'invalid_rule' AND ($1 = '' OR rule = $1) AND ($2 = '' OR reason = $2)
GROUP BY rule ORDER BY rule`, f.Rule, f.Reason)
		if err != nil {
			return fmt.Errorf("retry: %w", err)
		}
		type batch struct {
			rule string
			keys []json.RawMessage
		}
		batches, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (batch, error) {
			var b batch
			err := r.Scan(&b.rule, &b.keys)
			return b, err
		})
		if err != nil {
			return fmt.Errorf("retry: %w", err)
		}
		for _, b := range batches {
			r := e.live.valid[b.rule]
			if r == nil {
				continue // not running: its errors wait for the rule to be fixed
			}
			keys, _ := json.Marshal(b.keys)
			found, err := readRows(ctx, e.live.src, r, byKeysSQL(r), string(keys))
			if err != nil {
				return fmt.Errorf("retry %s: %w", r.Name, err)
			}
			todo = append(todo, retryRows{r, b.keys, found})
		}
		return nil
	})
	if err != nil {
		return err
	}
	n, sub := 0, 0
	for _, t := range todo {
		seen := map[string]bool{}
		lane := t.rule.Target.Name()
		for _, row := range t.found {
			seen[string(canonicalJSON(row.keyJSON))] = true
			pos, ok := e.admit(lane, sub)
			sub++
			if !ok {
				continue
			}
			it, err := e.resultItem(ctx, t.rule, row, true)
			if err != nil {
				return err
			}
			it.lsn = lsn
			if err := e.emit(ctx, pos, it); err != nil {
				return err
			}
			n++
		}
		for _, k := range t.keys {
			if seen[string(canonicalJSON(k))] {
				continue
			}
			pos, ok := e.admit(lane, sub)
			sub++
			if !ok {
				continue
			}
			if err := e.emit(ctx, pos, item{kind: itemResolve, rule: t.rule, target: t.rule.Target, keyJSON: k}); err != nil {
				return err
			}
		}
	}
	e.log.Info("retry", "lsn", lsn.String(), "rule", f.Rule, "reason", f.Reason, "rows", n)
	return nil
}

// canonicalJSON re-encodes a JSON object with sorted keys and no spaces, so
// that keys from the errors table and from KeyJSON compare equal.
func canonicalJSON(b []byte) []byte {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return b
	}
	out, _ := json.Marshal(v)
	return out
}
