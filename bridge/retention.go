package bridge

import (
	"context"
	"log/slog"
	"time"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/internal/reconn"
	"github.com/pgimageai/pgimageai/internal/supervise"
	"github.com/pgimageai/pgimageai/metrics"
	"github.com/pgimageai/pgimageai/state"
)

// Retention timing: the first pass a minute after the leader starts, then
// one every 10 minutes.
const (
	retentionFirst = time.Minute
	retentionEvery = 10 * time.Minute
)

// retention is what the leader's retention task needs.
type retention struct {
	log                  *slog.Logger
	sourceDSN, targetDSN string
	slot                 string // the leader's: retry requests are deleted behind it
	metrics              *metrics.Metrics
	first, every         time.Duration
}

// run deletes old bookkeeping rows while this instance leads
// (state.Prune: pgimageai.retention's horizons; the results, Batch API
// answers and open errors of deleted rules when source and target are one
// database; state.PruneRetryRequests: the retry requests the slot has
// passed), in small batches, counting them in metrics. A failure is
// logged and the pass tried again next time. It runs on a goroutine of
// the leadership (supervise) until ctx ends or its soft stop.
func (r retention) run(ctx context.Context) error {
	ctx, cancel := supervise.Soft(ctx)
	defer cancel()
	conns := reconn.NewPair(r.sourceDSN, r.targetDSN)
	wait := r.first
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = r.every
		pruned, err := pruneOnce(ctx, conns, r.slot)
		conns.Close(context.WithoutCancel(ctx)) // no connection held between passes
		if err != nil && ctx.Err() == nil {
			r.log.Warn("retention pass failed; trying again at the next", "err", err)
		}
		var total int64 // what the pass deleted before any failure is deleted
		for table, n := range pruned {
			r.metrics.Pruned(table, n)
			total += n
		}
		if total > 0 {
			r.log.Info("retention: old bookkeeping rows deleted", "rows", total, "by_table", map[string]int64(pruned))
		}
	}
}

// pruneOnce is one retention pass on conns: the target's bookkeeping, then
// the retry requests on the source that slot has passed.
func pruneOnce(ctx context.Context, conns *reconn.Pair, slot string) (state.Pruned, error) {
	src, tgt, err := conns.Conns(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	if rules.SameDatabase(src, tgt) {
		if names, err = state.RuleNames(ctx, src); err != nil {
			return nil, err
		}
	}
	pruned, err := state.Prune(ctx, tgt, names)
	if err != nil {
		return pruned, err
	}
	n, err := state.PruneRetryRequests(ctx, src, slot)
	pruned["retry_requests"] = n
	return pruned, err
}
