package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/pgimageai/pgimageai/bridge/backfill"
	"github.com/pgimageai/pgimageai/bridge/cost"
	"github.com/pgimageai/pgimageai/bridge/park"
	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/state"

	"github.com/pgimageai/pgimageai/replication"
)

// retryFilter is a retry request's filters; "" matches everything. Key,
// when set, names one source row of Rule (source_key JSON), whatever its
// reason.
type retryFilter struct {
	Rule   string
	Reason string
	Key    string
}

// rereads reprocesses source rows at a WAL position: those of an
// operator's retry request (retry.go) and parked rows sent again (unpark.go).
type rereads struct {
	*base
	res    *results
	daily  *cost.Daily
	parked *park.Drainer // whose markers place pages of parked rows; nil = none
	// budgets is set when a UTC day began: the rows refused for a spent
	// budget are to be retried (see exhausted).
	budgets bool
}

// request handles a row inserted into pgimageai.retry_requests, which
// `pgimageai retry` writes: only roles granted INSERT on it (operators) can
// ask the bridge to pay for calls again.
func (x *rereads) request(ctx context.Context, ch *replication.Change) error {
	r := replication.TupleReader{M: x.typeMap, Rel: ch.Relation, T: ch.New}
	var f retryFilter
	var err error
	if f.Rule, err = r.Text("rule"); err != nil {
		return fmt.Errorf("retry request at %s: %w", ch.LSN, err)
	}
	if f.Reason, err = r.Text("reason"); err != nil {
		return fmt.Errorf("retry request at %s: %w", ch.LSN, err)
	}
	if ch.Relation.ColumnIndex("source_key") >= 0 { // not in a request written before the column was added
		key, err := r.Value("source_key")
		if err != nil {
			return fmt.Errorf("retry request at %s: %w", ch.LSN, err)
		}
		if key != nil {
			b, err := json.Marshal(key)
			if err != nil {
				return fmt.Errorf("retry request at %s: source_key: %w", ch.LSN, err)
			}
			f.Key = string(b)
		}
	}
	return x.retry(ctx, f, ch.LSN)
}

// retryChunk is how many error keys one retry query is given; each query
// then returns at most backfill.RetryRows rows and backfill.PageBytes of
// images.
const retryChunk = 1000

// retry reprocesses, inside the request's transaction, the current source
// rows behind the open errors (other than invalid_rule) that match the
// filter. A row that no longer exists has its errors resolved.
//
// The keys are read first; then the rows, in pages bounded by rows and by
// image bytes (an image over max_image_bytes is not fetched: it is a
// too_large row), each page routed before the next is read. Every key has a
// fixed position (its number in the list), so a page read again after a
// failure routes nothing twice.
func (x *rereads) retry(ctx context.Context, f retryFilter, lsn replication.LSN) error {
	var batches []state.RuleKeys
	err := x.conns.Retrying(ctx, x.log, "reading the errors to retry", func(_, tgt *pgx.Conn) error {
		var err error
		if f.Key != "" {
			batches, err = state.RetryRowKeys(ctx, tgt, f.Rule, f.Key)
		} else {
			batches, err = state.RetryKeys(ctx, tgt, f.Rule, f.Reason)
		}
		return err
	})
	if err != nil {
		return err
	}
	n, sub := 0, 0
	for _, b := range batches {
		r := x.rules.set.Named(b.Rule)
		if r == nil {
			sub += len(b.Keys)
			continue // not running: its errors wait for the rule to be fixed
		}
		lane := r.Target.Name()
		for lo := 0; lo < len(b.Keys); lo += retryChunk {
			chunk := b.Keys[lo:min(lo+retryChunk, len(b.Keys))]
			keys, _ := json.Marshal(chunk)
			base := sub
			next := 0 // ordinal (from 1) of the next key to account for
			// emitMissing resolves the errors of keys base+next.. up to
			// ordinal upTo (exclusive): their rows are gone.
			emitMissing := func(upTo int) error {
				for ; next+1 < upTo; next++ {
					if err := x.out.place(ctx, base+next, work.Item{Kind: work.Resolve, Rule: r.Ref(), Dest: work.Dest{Target: r.Target}, Row: work.Row{JSON: chunk[next]}}); err != nil {
						return err
					}
				}
				return nil
			}
			var after int64
			for {
				var rows []backfill.Row
				var total int
				err := x.conns.Retrying(ctx, x.log, "reading the rows to retry", func(src, _ *pgx.Conn) error {
					var err error
					rows, total, err = backfill.ReadPage(ctx, src, r, backfill.ByKeysSQL(r), string(keys), after)
					return err
				})
				if err != nil {
					return err
				}
				for _, row := range rows {
					if err := emitMissing(int(row.Ord)); err != nil {
						return err
					}
					next = int(row.Ord)
					pos, ok := x.out.admit(lane, base+int(row.Ord)-1)
					if !ok {
						continue
					}
					it, err := x.res.resultItem(ctx, r, row, true, false)
					if err != nil {
						return err
					}
					it.LSN = lsn
					if err := x.out.emit(ctx, pos, it); err != nil {
						return err
					}
					n++
				}
				// Done when neither the row limit nor the byte cut
				// stopped the read.
				if len(rows) == 0 || total < backfill.RetryRows && len(rows) == total {
					break
				}
				after = rows[len(rows)-1].Ord
			}
			if err := emitMissing(len(chunk) + 1); err != nil {
				return err
			}
			sub += len(chunk)
		}
	}
	x.log.Info("retry", "lsn", lsn.String(), "rule", f.Rule, "reason", f.Reason, "one_row", f.Key != "", "rows", n)
	return nil
}

// exhausted asks, once a new UTC day began, for a retry of the rows
// refused for a spent budget: a row of pgimageai.retry_requests, so that the
// retry happens at a WAL position like an operator's. A failure is tried
// again at the next check.
func (x *rereads) exhausted(ctx context.Context) {
	if x.daily.NewDay() {
		x.budgets = true
	}
	if !x.budgets {
		return
	}
	src, tgt, err := x.conns.Conns(ctx)
	if err != nil {
		x.log.Warn("retrying the rows refused for a spent budget failed; trying again at the next check", "err", err)
		return
	}
	n, err := state.CountRetryable(ctx, tgt, "", functions.BudgetExhausted)
	if err == nil && n > 0 {
		_, err = state.RequestRetry(ctx, src, "", functions.BudgetExhausted)
		if err == nil {
			x.log.Info("a new UTC day: retrying the rows refused for a spent budget", "rows", n)
		}
	}
	if err != nil {
		x.log.Warn("retrying the rows refused for a spent budget failed; trying again at the next check", "err", err)
		return
	}
	x.budgets = false
}
