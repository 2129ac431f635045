package apply

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgimageai/pgimageai/bridge/leader"
	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/internal/backoff"
	"github.com/pgimageai/pgimageai/internal/logsum"
	"github.com/pgimageai/pgimageai/internal/pgerr"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

// maxWriteBackoff caps the wait between attempts of a failed target write:
// short, so that the bridge catches up soon after the target is back.
const maxWriteBackoff = 5 * time.Second

// write writes items in one target transaction, retrying with backoff until
// it succeeds or ctx ends, then releases their budget and marks them done.
func (l *lane) write(ctx context.Context, items []work.Item) error {
	l.stat.writing.Store(int64(len(items)))
	if items[0].Txn != nil {
		l.stat.oldest.Store(items[0].Txn.CommitTime().UnixNano())
	}
	defer l.stat.writing.Store(0)
	b := batch{parked: l.ls.cfg.Parked}
	for i := range items {
		b.add(&items[i])
	}
	ops := b.final(l.ls.cfg.Own)
	last := items[len(items)-1]
	err := l.commit(ctx, ops, last, items)
	if errors.Is(err, errRefused) {
		return l.isolate(ctx, items, err)
	}
	if errors.Is(err, errStale) {
		// Refused for want of a privilege, with items of rules that no
		// longer run (made invalid_rule for it): they are abandoned, the
		// rest is written.
		var keep, drop []work.Item
		for _, it := range items {
			if it.Rule != nil && l.ls.cfg.Targets.Live != nil && !l.ls.cfg.Targets.Live(it.Rule) {
				drop = append(drop, it)
			} else {
				keep = append(keep, it)
			}
		}
		l.abandon(drop, err)
		if len(keep) == 0 {
			return nil
		}
		return l.write(ctx, keep)
	}
	if errors.Is(err, ErrNoRules) {
		l.abandon(items, err)
		return nil
	}
	if err != nil {
		return err
	}
	l.done(items)
	l.stat.mu.Lock()
	l.stat.pos, l.stat.commitTime = last.Pos, last.Txn.CommitTime()
	l.stat.mu.Unlock()
	l.stat.written.Add(int64(len(ops)))
	l.stat.batches.Add(1)
	for k, n := range b.dropped() {
		l.ls.cfg.Metrics.ErrorsDropped(k[0], k[1], n)
	}
	l.stat.errorsN.Add(int64(b.errorsN))
	l.ls.cfg.Metrics.Written(b.rows, b.reasons)
	return nil
}

// abandon gives up items whose target cannot be written and has no rule
// left (the rule deleted, its target dropped): nothing would read them, and
// holding them would hold the slot — and the server's WAL — for good. Their
// budget is released and their transactions count them done, so the slot
// moves on; the log says so once for the lane.
func (l *lane) abandon(items []work.Item, err error) {
	if l.stat.abandoned.Add(int64(len(items))) == int64(len(items)) {
		l.ls.cfg.Log.Warn("the lane's target cannot be written and no rule writes it any more; its pending changes are abandoned",
			"lane", l.name, "items", len(items), "err", err)
	}
	l.done(items)
}

// done releases items' budget and marks them done in their rows and
// transactions.
func (l *lane) done(items []work.Item) {
	l.stat.progress.Store(time.Now().UnixNano())
	var cost int64
	for i := range items {
		cost += items[i].Cost
	}
	l.ls.cfg.Budget.Release(cost)
	for i := range items {
		l.ls.rows.Done(l.name, items[i].Rows()...)
		if it := &items[i]; it.Kind == work.Backfill && it.Progress.Done {
			// Its last page is written: every row it read has its result.
			l.ls.cfg.Log.Info("backfill done", "rule", it.Progress.Rule, "lane", l.name)
		}
	}
	for i := 0; i < len(items); {
		j := i + 1
		for j < len(items) && items[j].Txn == items[i].Txn {
			j++
		}
		l.ls.cfg.Tracker.Done(items[i].Txn, j-i)
		i = j
	}
}

// refusedLogs holds the per-row "refused a result" errors to one line a lane
// and minute, with the count of the rest (each row has its errors row).
var refusedLogs logsum.Sampled

// errRefused marks a write the target refused for what it holds (a data
// exception or a constraint, SQLSTATE classes 22 and 23): writing the same
// again would fail the same way.
var errRefused = errors.New("the target refused the write")

// refusal is what the server said of a refused write.
func refusal(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return fmt.Sprintf("%s (SQLSTATE %s)", pe.Message, pe.Code)
	}
	return err.Error()
}

// refused reports a write error that retrying cannot fix.
func refused(err error) bool {
	code := pgerr.SQLState(err)
	return len(code) == 5 && (code[:2] == "22" || code[:2] == "23")
}

// isolate writes items one at a time after the target refused them
// together, so that one row the target cannot take never holds the lane
// (one bad row never blocks the stream): a result it refuses is written
// as a NULL with a bad_response errors row saying why. Any other item it
// refuses stops the lane: dropping a delete or a move would lose a change.
func (l *lane) isolate(ctx context.Context, items []work.Item, err error) error {
	if len(items) > 1 {
		for i := range items {
			if err := l.write(ctx, items[i:i+1]); err != nil {
				return err
			}
		}
		return nil
	}
	it := &items[0]
	if it.Kind != work.Result || (it.Call != nil && it.Call.Err != nil) {
		return l.recordRefusal(ctx, items, err)
	}
	size, head := 0, []byte(nil)
	if it.Call != nil {
		size, head = it.Call.Size, it.Call.Head
	}
	refusedLogs.Log(l.ls.cfg.Log, slog.LevelError, l.name, "the target refused a result; writing it as a bad_response", "lane", l.name, "key", string(it.Row.JSON), "err", err)
	it.Call = work.Failed(&functions.Error{Reason: functions.BadResponse, ImageBytes: size, ImageHead: head,
		Detail: fmt.Sprintf("model %s: the target column %s.%s refused the answer: %s", it.Rule.Model, it.Dest.Target.Name(), it.Dest.Target.Column, refusal(err))}, size, head)
	return l.write(ctx, items)
}

// recordRefusal writes, in place of the one item the target refuses
// whatever it holds — a delete or move that a constraint forbids (another
// table's foreign key), a NULL that a NOT NULL column refuses — an errors
// row target_refused for each rule the item is for, at its position, and
// moves on: retrying would fail the same way for good, and hold the slot.
// The target row is left as it was; the detail says what the target said.
// Bookkeeping items (of pgimageai's own tables) refused stop the lane.
func (l *lane) recordRefusal(ctx context.Context, items []work.Item, cause error) error {
	it := &items[0]
	var names []string
	switch it.Kind {
	case work.Result:
		names = []string{it.Rule.Name}
	case work.Move, work.Delete, work.Truncate:
		names = it.Dest.Rules
	default:
		return cause
	}
	what := map[work.Kind]string{work.Result: "store the result of", work.Move: "move", work.Delete: "delete", work.Truncate: "empty the table of"}[it.Kind]
	detail := fmt.Sprintf("the target %s refused to %s the row: %s; the target row is left as it was", it.Dest.Target.Name(), what, refusal(cause))
	if it.Kind == work.Result && it.Call != nil && it.Call.Err != nil {
		detail += " (the row's own failure: " + it.Call.Err.Error() + ")"
	}
	key := it.Row.JSON
	if len(key) == 0 {
		key = []byte("{}")
	}
	ops := make([]sink.Op, 0, len(names))
	for _, name := range names {
		ops = append(ops, state.Error{Rule: name, SourceTable: it.Dest.SourceTable, Key: key, LSN: it.LSN,
			Reason: string(functions.TargetRefused), Detail: detail})
	}
	refusedLogs.Log(l.ls.cfg.Log, slog.LevelError, l.name, "the target refused a change; recording it as target_refused", "lane", l.name,
		"kind", it.Kind.String(), "key", string(key), "err", cause)
	if err := l.commit(ctx, ops, *it, nil); err != nil {
		return err // refused again, fenced, or ctx ended: stop
	}
	l.done(items)
	l.stat.mu.Lock()
	l.stat.pos, l.stat.commitTime = it.Pos, it.Txn.CommitTime()
	l.stat.mu.Unlock()
	l.stat.batches.Add(1)
	l.stat.errorsN.Add(int64(len(ops)))
	l.ls.cfg.Metrics.Written(nil, map[string]int{string(functions.TargetRefused): len(ops)})
	return nil
}

// commit writes ops in one target transaction with last's position,
// retrying with backoff until it succeeds, ctx ends, the lane is fenced, or
// the target refuses what it holds (errRefused).
func (l *lane) commit(ctx context.Context, ops []sink.Op, last work.Item, items []work.Item) error {
	bo := backoff.Backoff{Min: l.ls.cfg.Backoff, Max: maxWriteBackoff}
	for attempt := 1; ; attempt++ {
		err := l.w.Write(ctx, ops, last.Pos, last.Txn.CommitTime())
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, state.ErrFenced) {
			return fmt.Errorf("%w: %w", leader.ErrLeadershipLost, err)
		}
		if last.Kind == work.Switch && !pgerr.Transient(err) && pgerr.SQLState(err) != pgerr.LockNotAvailable {
			// Something came in the way of the switch since its watcher
			// found it ready (a view on the live column, the table's
			// ownership): tried a few times, then the bridge starts over
			// from its checkpoint, where the watcher holds the switch and
			// says why — rather than hold the lane, and the stream, on it.
			if attempt >= switchAttempts {
				return fmt.Errorf("%w: %w", ErrSwitchFailed, err)
			}
			l.ls.cfg.Log.Error("switch transaction failed; retrying", "lane", l.name, "attempt", attempt, "err", err)
			if err := bo.Sleep(ctx); err != nil {
				return err
			}
			continue
		}
		if refused(err) {
			return fmt.Errorf("%w: %w", errRefused, err)
		}
		if l.isClosed() {
			// A graceful stop does not wait on a target that fails: what
			// the lane holds stays unconfirmed and is read again at the
			// next start.
			l.ls.cfg.Log.Warn("stopping without writing what the lane holds: the target write failed; it is read again at the next start",
				"lane", l.name, "ops", len(ops), "err", err)
			return errStopping
		}
		l.ls.cfg.Log.Error("target write failed; retrying", "lane", l.name, "attempt", attempt, "ops", len(ops), "position", last.Pos.String(), "err", err)
		if pgerr.SQLState(err) == pgerr.InsufficientPrivilege {
			// Not for a retry to cure: the engine checks the lane's rules
			// again, which finds the missing privilege and makes them
			// invalid_rule (with the GRANT to run); then nothing writes
			// the lane any more and what it holds is abandoned. The rules
			// backfill once the privilege is granted.
			if l.ls.cfg.Targets.Any != nil && !l.ls.cfg.Targets.Any(l.name) {
				return fmt.Errorf("%w: %w", ErrNoRules, err)
			}
			for i := range items {
				if r := items[i].Rule; r != nil && l.ls.cfg.Targets.Live != nil && !l.ls.cfg.Targets.Live(r) {
					return fmt.Errorf("%w: %w", errStale, err)
				}
			}
			select {
			case l.ls.unwritable <- l.name:
			default: // a check is requested already
			}
		}
		if missingTarget(err) && l.ls.cfg.Targets.Repair != nil {
			if rerr := l.ls.cfg.Targets.Repair(ctx, l.name); errors.Is(rerr, ErrNoRules) {
				return fmt.Errorf("%w: %w", ErrNoRules, err)
			} else if rerr != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				l.ls.cfg.Log.Error("re-creating the target failed", "lane", l.name, "err", rerr)
			} else {
				l.ls.cfg.Log.Warn("target table or column was missing; re-created it", "lane", l.name)
				select {
				case l.ls.repaired <- l.name:
				default: // a backfill of the lane is requested already
				}
			}
		}
		if err := bo.Sleep(ctx); err != nil {
			return err
		}
	}
}

// ErrSwitchFailed: a switch transaction failed switchAttempts times for a
// reason that does not pass by itself; the bridge starts over from its
// checkpoint (see bridge.Run).
var ErrSwitchFailed = errors.New("the switch transaction failed")

// switchAttempts is how often a switch transaction is tried before
// ErrSwitchFailed; pgerr.LockNotAvailable (its lock_timeout) is tried for good.
const switchAttempts = 3

// errStale: a write refused for want of a privilege holds items of rules
// that no longer run (see write).
var errStale = errors.New("items of rules that no longer run")

// errStopping: a write failed while the lane drains for a graceful stop;
// the lane stops at once without it (see commit).
var errStopping = errors.New("stopping: the target write failed")

// ErrNoRules is what Config.Repair returns for a lane no rule writes any
// more: its target is not made again, and what the lane holds for it is
// abandoned.
var ErrNoRules = errors.New("no rule writes the lane's target")

// missingTarget reports a write that failed because its target table or
// column does not exist (SQLSTATE 42P01 undefined_table, 42703
// undefined_column).
func missingTarget(err error) bool {
	code := pgerr.SQLState(err)
	return code == pgerr.UndefinedTable || code == pgerr.UndefinedColumn
}
