package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/metrics"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/sink"
)

// writer is what the applier needs of the sink.
type writer interface {
	Write(ctx context.Context, ops []sink.Op, checkpoint replication.LSN) error
}

// maxWriteBackoff caps the wait between attempts of a failed target write:
// short, so that the bridge catches up soon after the target is back.
const maxWriteBackoff = 5 * time.Second

// applier turns committed transactions into sink ops in source commit order,
// waits for their calls, writes batches of transactions in one target
// transaction each, and acks each batch's end LSN. It runs on one goroutine.
type applier struct {
	log      *slog.Logger
	w        writer
	ack      func(replication.LSN)
	maxOps   int           // flush once a batch holds this many ops
	backoff  time.Duration // first wait after a failed write
	written  int64         // ops written, for tests and logs
	batches  int64
	errorsN  int64
	lastDone replication.LSN
	usage    map[[2]string]*sink.Usage // by rule and model, for the batch being built
	metrics  *metrics.Metrics
	endTime  time.Time // source commit time of the batch's last transaction
}

// run applies transactions from in until it is closed (then it flushes what
// it holds and returns nil) or ctx ends.
func (a *applier) run(ctx context.Context, in <-chan *txn) error {
	var ops []sink.Op
	var end replication.LSN
	var next *txn
	open := true
	for {
		if next == nil {
			if !open {
				return a.flush(ctx, ops, end)
			}
			select {
			case t, ok := <-in:
				if !ok {
					return a.flush(ctx, ops, end)
				}
				next = t
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		for _, it := range next.items {
			if it.call == nil {
				continue
			}
			select {
			case <-it.call.done:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		ops = a.build(ops, next)
		if next.commit.EndLSN != 0 { // 0: a backfill page, not a source transaction
			end, a.endTime = next.commit.EndLSN, next.commit.CommitTime
		}
		next = nil
		// Keep batching while the following transaction is already complete.
		select {
		case t, ok := <-in:
			if ok {
				next = t
			} else {
				open = false
			}
		default:
		}
		if next == nil || !next.ready() || len(ops) >= a.maxOps {
			if err := a.flush(ctx, ops, end); err != nil {
				return err
			}
			ops = ops[:0]
		}
	}
}

// flush writes ops with checkpoint end, retrying with backoff until it
// succeeds or ctx ends, and then acks end. A batch without ops is acked
// without a write: there is nothing to make durable.
func (a *applier) flush(ctx context.Context, ops []sink.Op, end replication.LSN) error {
	for _, u := range a.usage {
		ops = append(ops, *u)
	}
	clear(a.usage)
	if len(ops) > 0 {
		ops = markOwnWrites(ops)
		wait := a.backoff
		for attempt := 1; ; attempt++ {
			err := a.w.Write(ctx, ops, end)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, sink.ErrFenced) {
				return fmt.Errorf("%w: %w", ErrLeadershipLost, err)
			}
			a.log.Error("target write failed; retrying", "attempt", attempt, "ops", len(ops), "checkpoint", end.String(), "err", err)
			d := wait/2 + rand.N(wait/2+1)
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return ctx.Err()
			}
			wait = min(wait*2, maxWriteBackoff)
		}
		a.written += int64(len(ops))
		a.batches++
		a.observe(ops)
	}
	if end != 0 {
		a.lastDone = end
		a.ack(end)
	}
	return nil
}

// observe records a committed batch in the metrics.
func (a *applier) observe(ops []sink.Op) {
	if a.metrics == nil {
		return
	}
	rows, reasons := map[string]int{}, map[string]int{}
	for _, op := range ops {
		switch op := op.(type) {
		case sink.Upsert:
			rows["upsert"]++
		case sink.Delete:
			rows["delete"]++
		case sink.Move:
			rows["move"]++
		case sink.Truncate:
			rows["truncate"]++
		case sink.Error:
			reasons[op.Reason]++
		}
	}
	a.metrics.Written(rows, reasons, a.endTime)
}

// count adds one answered call and its tokens to the batch's usage. Calls
// served by the cache cost nothing and are not counted.
func (a *applier) count(r *Rule, u provider.Usage) {
	if a.usage == nil {
		a.usage = map[[2]string]*sink.Usage{}
	}
	k := [2]string{r.Name, r.Model}
	agg := a.usage[k]
	if agg == nil {
		agg = &sink.Usage{Rule: r.Name, Model: r.Model}
		a.usage[k] = agg
	}
	agg.Calls++
	agg.PromptTokens += int64(u.PromptTokens)
	agg.CompletionTokens += int64(u.CompletionTokens)
}

// markOwnWrites puts the OwnWrites marker first when the batch writes to a
// source table (write-back), so that the bridge ignores those changes when it
// reads them back from the WAL.
func markOwnWrites(ops []sink.Op) []sink.Op {
	for _, op := range ops {
		if up, ok := op.(sink.Upsert); ok && up.Target.WriteBack {
			return append([]sink.Op{sink.OwnWrites{}}, ops...)
		}
	}
	return ops
}

// build appends the ops of one transaction.
func (a *applier) build(ops []sink.Op, t *txn) []sink.Op {
	forgot := map[string]bool{}
	for _, it := range t.items {
		switch it.kind {
		case itemMove:
			ops = append(ops, sink.Move{Target: it.target, OldKey: it.oldKey, NewKey: it.key})
			if !forgot["move"+string(it.oldKeyJSON)] {
				forgot["move"+string(it.oldKeyJSON)] = true
				ops = append(ops, sink.RekeyErrors{SourceTable: it.sourceTable, OldKey: it.oldKeyJSON, NewKey: it.keyJSON})
			}
		case itemDelete:
			ops = append(ops, sink.Delete{Target: it.target, Key: it.key})
			if !forgot["del"+string(it.keyJSON)] {
				forgot["del"+string(it.keyJSON)] = true
				ops = append(ops, sink.ForgetRow{SourceTable: it.sourceTable, Key: it.keyJSON})
			}
		case itemTruncate:
			ops = append(ops, sink.Truncate{Target: it.target})
			if !forgot["trunc"+it.sourceTable] {
				forgot["trunc"+it.sourceTable] = true
				ops = append(ops, sink.ForgetRow{SourceTable: it.sourceTable})
			}
		case itemResult:
			ops = a.result(ops, it)
		case itemBackfill:
			ops = append(ops, it.progress)
		case itemResolve:
			ops = append(ops, sink.Resolve{Rule: it.rule.Name, Key: it.keyJSON})
		}
	}
	return ops
}

// result appends the ops of one function result: the value (NULL on
// failure), and the errors row or the resolution of earlier ones.
func (a *applier) result(ops []sink.Op, it item) []sink.Op {
	var res functions.Result
	var err error
	if it.call == nil {
		res = functions.Result{Null: true}
	} else {
		res, err = it.call.result, it.call.err
	}
	if err == nil && !res.Null && it.target.Dim > 0 && len(res.Vector) != it.target.Dim {
		err = &functions.Error{Reason: functions.BadResponse, ImageBytes: it.call.size, ImageHead: it.call.head,
			Detail: fmt.Sprintf("model %s returned a vector of %d dimensions; target column %s.%s is vector(%d)",
				it.rule.Model, len(res.Vector), it.target.Name(), it.target.Column, it.target.Dim)}
		res = functions.Result{Null: true}
	}
	var value any
	switch {
	case err != nil || res.Null:
	case it.rule.Fn.Name() == functions.Embed:
		value = res.Vector
	default:
		value = res.Text
	}
	ops = append(ops, sink.Upsert{Target: it.target, Key: it.key, Value: value})
	if it.call != nil && !it.call.hit && it.call.err == nil {
		a.count(it.rule, res.Usage)
	}
	if err == nil {
		return append(ops, sink.Resolve{Rule: it.rule.Name, Key: it.keyJSON})
	}
	a.errorsN++
	row := sink.Error{Rule: it.rule.Name, SourceTable: it.sourceTable, Key: it.keyJSON, LSN: it.lsn,
		Reason: string(functions.ProviderError), Detail: err.Error()}
	var fe *functions.Error
	if errors.As(err, &fe) {
		row.Reason, row.Detail = string(fe.Reason), fe.Detail
		if fe.ImageBytes >= 0 {
			n := fe.ImageBytes
			row.ImageBytes, row.ImageHead = &n, fe.ImageHead
		}
	}
	return append(ops, row)
}
