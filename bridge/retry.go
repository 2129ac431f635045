package bridge

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/pgimageai/pgimageai/state"

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

// retryChunk is how many error keys one retry query is given; each query
// then returns at most retryPage rows and pageBytes of images.
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
func (e *engine) retry(ctx context.Context, f retryFilter, lsn replication.LSN) error {
	var batches []state.RuleKeys
	err := e.live.retrying(ctx, "reading the errors to retry", func() error {
		var err error
		batches, err = state.RetryKeys(ctx, e.live.tgt, f.Rule, f.Reason)
		return err
	})
	if err != nil {
		return err
	}
	n, sub := 0, 0
	for _, b := range batches {
		r := e.rules.byName[b.Rule]
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
					if pos, ok := e.admit(lane, base+next); ok {
						if err := e.emit(ctx, pos, item{kind: itemResolve, rule: r, target: r.Target, keyJSON: chunk[next]}); err != nil {
							return err
						}
					}
				}
				return nil
			}
			var after int64
			for {
				var rows []pageRow
				var total int
				err := e.live.retrying(ctx, "reading the rows to retry", func() error {
					var err error
					rows, total, err = readPage(ctx, e.live.src, r, byKeysSQL(r), string(keys), after)
					return err
				})
				if err != nil {
					return err
				}
				for _, row := range rows {
					if err := emitMissing(int(row.ord)); err != nil {
						return err
					}
					next = int(row.ord)
					pos, ok := e.admit(lane, base+int(row.ord)-1)
					if !ok {
						continue
					}
					it, err := e.resultItem(ctx, r, row, true)
					if err != nil {
						return err
					}
					it.lsn = lsn
					if err := e.emit(ctx, pos, it); err != nil {
						return err
					}
					n++
				}
				// Done when neither the row limit nor the byte cut
				// stopped the read.
				if len(rows) == 0 || total < retryPage && len(rows) == total {
					break
				}
				after = rows[len(rows)-1].ord
			}
			if err := emitMissing(len(chunk) + 1); err != nil {
				return err
			}
			sub += len(chunk)
		}
	}
	e.log.Info("retry", "lsn", lsn.String(), "rule", f.Rule, "reason", f.Reason, "rows", n)
	return nil
}
