package apply

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgimageai/pgimageai/bridge/cost"
	"github.com/pgimageai/pgimageai/bridge/leader"
	"github.com/pgimageai/pgimageai/bridge/track"
	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/internal/backoff"
	"github.com/pgimageai/pgimageai/internal/logsum"
	"github.com/pgimageai/pgimageai/internal/pgerr"
	"github.com/pgimageai/pgimageai/metrics"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

// Writer is what a lane needs of the sink: *sink.Writer.
type Writer interface {
	Write(ctx context.Context, ops []sink.Op, pos state.Position, commitTime time.Time) error
	Close(ctx context.Context) error
	// Forget deletes the lane's checkpoint row: the lane is retired.
	Forget(ctx context.Context) error
}

// A lane whose ready prefix is short while the call right behind it is in
// flight waits up to LingerFor (or until lingerRows are ready) before it
// writes: under load, a target transaction then holds ~140 rows rather
// than ~28, and each transaction costs the database ~0.8 ms of CPU of its
// own (BenchmarkFastPath: 23 µs less database CPU per row in catch-up). A
// lane with nothing in flight behind its ready items writes at once, so a
// trickle of changes gets no delay; a provider call takes far longer than
// LingerFor anyway.
const (
	LingerFor  = 20 * time.Millisecond
	lingerRows = 500
)

// closedChan is a channel that is always closed: a wait that ends at once.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// maxWriteBackoff caps the wait between attempts of a failed target write:
// short, so that the bridge catches up soon after the target is back.
const maxWriteBackoff = 5 * time.Second

// lane applies the items of one target table in source order: rules that
// share a target table share a lane, so a DELETE never overtakes an upsert
// of the same row. It writes the ready prefix of its queue as soon as the
// calls of that prefix have finished, in chunks of at most MaxOps items,
// each in one target transaction with the lane's checkpoint — so a slow
// model holds back only its own lane, and a big source transaction is
// written as it completes, never held to its end.
//
// push is called by the engine's goroutine; run by the lane's own.
type lane struct {
	name string
	w    Writer
	ls   *Lanes // what every lane shares: Config, rows, repaired

	mu     sync.Mutex
	queue  []work.Item
	closed bool // no more items: drain and stop
	// retiring: no rule writes the lane's target any more; once it holds
	// nothing it stops (Lanes.retire), unless a push comes first.
	retiring bool
	wake     chan struct{} // signalled by push and close
	stop     chan struct{} // closed by close: a held prefix is written at once
	// lingering is when a short ready prefix began to wait for the calls
	// behind it (see LingerFor).
	lingering time.Time

	stat laneStat
}

// laneStat is what a lane reports, read by status and metrics.
type laneStat struct {
	mu         sync.Mutex
	pos        state.Position
	commitTime time.Time
	written    atomic.Int64 // ops written
	batches    atomic.Int64
	errorsN    atomic.Int64
	abandoned  atomic.Int64 // items given up: no rule writes the target any more
	progress   atomic.Int64 // Unix ns of the last write, or of the queue becoming non-empty
	writing    atomic.Int64 // items taken from the queue and being written
	oldest     atomic.Int64 // Unix ns: source commit time of the first item being written
}

func newLane(name string, w Writer, ls *Lanes) *lane {
	return &lane{name: name, w: w, ls: ls, wake: make(chan struct{}, 1), stop: make(chan struct{})}
}

// push appends an item at the end of the lane.
func (l *lane) push(it work.Item) {
	l.mu.Lock()
	l.retiring = false
	if len(l.queue) == 0 {
		l.stat.progress.Store(time.Now().UnixNano()) // holding something from now on
	}
	l.queue = append(l.queue, it)
	l.mu.Unlock()
	l.signal()
}

func (l *lane) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// close lets the lane write what it holds and stop.
func (l *lane) close() {
	l.mu.Lock()
	if !l.closed {
		close(l.stop)
	}
	l.closed = true
	l.mu.Unlock()
	l.signal()
}

// isClosed reports whether close was called.
func (l *lane) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// pending returns the items the lane holds.
func (l *lane) pending() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queue)
}

// first returns how many items the queue holds and the source commit time
// of the first.
func (l *lane) first() (int, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.queue) == 0 || l.queue[0].Txn == nil {
		return len(l.queue), time.Time{}
	}
	return len(l.queue), l.queue[0].Txn.CommitTime()
}

// take removes and returns the ready prefix of the queue, at most maxOps
// items. When nothing is ready it returns what to wait for: the first
// item's call, or nothing (wait for a push); done reports a closed, empty
// lane. A short ready prefix with a call in flight right behind it is held
// (see LingerFor): take returns that call and how much longer to wait.
func (l *lane) take(now time.Time) (items []work.Item, wait <-chan struct{}, hold time.Duration, done bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for n < len(l.queue) && n < l.ls.cfg.MaxOps && l.queue[n].Ready() {
		n++
		if k := l.queue[n-1].Kind; k == work.Switch || k == work.DropShadow {
			break // its transaction ends with it: what follows is not written under its lock
		}
	}
	// The prefix stopped at an item that is not ready (not at maxOps).
	blocked := n < len(l.queue) && n < l.ls.cfg.MaxOps && !l.queue[n].Ready()
	if n > 0 && n < lingerRows && blocked && !l.closed && l.ls.cfg.Linger > 0 {
		if l.lingering.IsZero() {
			l.lingering = now
		}
		if left := l.ls.cfg.Linger - now.Sub(l.lingering); left > 0 {
			if c := l.queue[n].NotReady(); c != nil {
				return nil, c.Done, left, false
			}
			return nil, closedChan, 0, false // it became ready since the loop looked
		}
	}
	l.lingering = time.Time{}
	if n == 0 {
		if len(l.queue) == 0 {
			return nil, nil, 0, l.closed || l.retiring
		}
		c := l.queue[0].NotReady()
		if c == nil { // it became ready since the loop looked: take it next time
			return nil, closedChan, 0, false
		}
		return nil, c.Done, 0, false
	}
	items = make([]work.Item, n)
	copy(items, l.queue[:n])
	clear(l.queue[:n]) // results are held by items only until written
	l.queue = l.queue[n:]
	return items, nil, 0, false
}

// run writes the lane's items until ctx ends or the lane is closed and
// empty.
func (l *lane) run(ctx context.Context) error {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	closed := false // the connection was given back while idle
	for {
		items, wait, hold, done := l.take(time.Now())
		if done {
			if l.isClosed() || l.ls.retire(ctx, l) {
				return nil
			}
			continue // a push came before the lane could retire
		}
		if len(items) == 0 {
			if hold > 0 {
				// Lingering: a push cannot change the ready prefix, so only
				// the call behind it, the time or a close (a graceful stop
				// writes what is ready at once) ends the wait.
				timer.Reset(hold)
				select {
				case <-wait:
				case <-timer.C:
				case <-l.stop:
				case <-ctx.Done():
					return ctx.Err()
				}
				timer.Stop()
				continue
			}
			// Idle: a lane with nothing to write for a while gives its target
			// connection back (the writer connects again on its next write),
			// so that lanes of rules long gone hold no connection.
			var idle <-chan time.Time
			if !closed && l.ls.cfg.Idle > 0 {
				timer.Reset(l.ls.cfg.Idle)
				idle = timer.C
			}
			select {
			case <-wait: // nil when waiting for a push: only wake fires
			case <-l.wake:
			case <-idle:
				l.w.Close(ctx)
				closed = true
			case <-ctx.Done():
				return ctx.Err()
			}
			timer.Stop()
			continue
		}
		closed = false
		if err := l.write(ctx, items); err != nil {
			if errors.Is(err, errStopping) {
				return nil // unconfirmed: read again at the next start
			}
			return err
		}
	}
}

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
		if last.Kind == work.Switch && !pgerr.Transient(err) && pgerr.SQLState(err) != codeLockNotAvailable {
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
		if pgerr.SQLState(err) == codeInsufficientPrivilege {
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
// ErrSwitchFailed; codeLockNotAvailable (its lock_timeout) is tried for good.
const (
	switchAttempts       = 3
	codeLockNotAvailable = "55P03"
)

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

// codeInsufficientPrivilege is SQLSTATE 42501 insufficient_privilege.
const codeInsufficientPrivilege = "42501"

// missingTarget reports a write that failed because its target table or
// column does not exist (SQLSTATE 42P01 undefined_table, 42703
// undefined_column).
func missingTarget(err error) bool {
	code := pgerr.SQLState(err)
	return code == "42P01" || code == "42703"
}

// Config is what every lane of a leadership shares.
type Config struct {
	Log       *slog.Logger
	NewWriter func(lane string) Writer
	Budget    *cost.Budget   // released as items are written
	Tracker   *track.Tracker // told what is durable
	Metrics   *metrics.Metrics
	MaxOps    int           // items per target transaction, at most
	Linger    time.Duration // see LingerFor; 0 = write at once
	Backoff   time.Duration // the first wait after a failed write
	// Targets answers what a lane asks of the rules of its target.
	Targets Targets
	Own     func(xid uint64) // receives the full IDs of write-back transactions
	// Idle is how long a lane with nothing to write keeps its target
	// connection; 0 = for good.
	Idle time.Duration
	// Parked is told of the rows that park and asked which rules may have
	// parked rows; nil = rows never park.
	Parked Parked
}

// Parked is what a lane tells and asks of the rows parked while their
// model is down (bridge/park.Rules). It must be safe for concurrent use.
type Parked interface {
	// Maybe reports whether some row of rule may be parked: a write for
	// a row of it then deletes the row's parked row.
	Maybe(rule string) bool
	// Parking is told that a row of rule parks, before its write.
	Parking(rule string)
}

// Targets is what a lane asks of the rules that write its target, answered
// by the engine; a nil function answers as noted.
type Targets struct {
	// Repair is called when a write finds the target table or column
	// missing (dropped while the bridge ran); it makes them again, and the
	// lane's name goes on Repaired so that the engine backfills its rules.
	// ErrNoRules: none writes it any more. nil = never repaired.
	Repair func(ctx context.Context, lane string) error
	// Any reports whether some rule still writes the lane's target; a
	// lane refused for want of a privilege abandons what it holds once none
	// does. nil = always.
	Any func(lane string) bool
	// Live reports whether a rule still runs as compiled; such a lane
	// abandons the items of the rules that do not (one rule of a shared
	// target may lack the privilege another has). nil = always.
	Live func(r *work.Rule) bool
}

// DefaultIdle is how long an idle lane keeps its target connection.
const DefaultIdle = time.Minute

// Lanes is the registry of lanes by target table. Get, Push and Drain are
// called by the engine's goroutine; the rest by anyone.
type Lanes struct {
	cfg      Config
	rows     RowCounts   // items waiting per row of each lane
	repaired chan string // lanes whose target was re-created, for the engine
	// unwritable: lanes the target refused for want of a privilege, for the
	// engine to check their rules again
	unwritable chan string
	onFail     atomic.Pointer[func(error)] // called with the first failure of any lane
	ctx        context.Context             // the lanes' goroutines end with it

	mu   sync.Mutex
	byID map[string]*lane
	wg   sync.WaitGroup
	errs chan error // the first failure of each lane
}

// New returns the lanes of cfg; their goroutines end with ctx.
func New(ctx context.Context, cfg Config) *Lanes {
	return &Lanes{cfg: cfg, ctx: ctx, repaired: make(chan string, 16), unwritable: make(chan string, 1), byID: map[string]*lane{}, errs: make(chan error, 64)}
}

// OnFail sets the function called with the first failure of any lane.
func (ls *Lanes) OnFail(f func(error)) { ls.onFail.Store(&f) }

// Repaired receives the lanes whose target table was re-created: their
// rules must backfill again.
func (ls *Lanes) Repaired() <-chan string { return ls.repaired }

// Unwritable receives lanes whose target refused a write for want of a
// privilege: the engine checks the rules again (Engine.RecheckNow).
func (ls *Lanes) Unwritable() <-chan string { return ls.unwritable }

// Rows is the count of items waiting per row, for the engine's decisions.
func (ls *Lanes) Rows() *RowCounts { return &ls.rows }

// Push routes it to its lane, starting the lane when new. The item is
// pushed under the registry's lock, so that a lane retiring meanwhile
// (retire) either takes it or is gone and a new one does.
func (ls *Lanes) Push(it work.Item) {
	lane := it.Dest.Target.Name()
	ls.rows.Route(lane, &it)
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.getLocked(lane).push(it)
}

// Retire stops the lane of target table name once it holds nothing: no rule
// writes that table any more. Its goroutine ends, its connection closes, its
// checkpoint row is deleted and it leaves status and metrics. A push before
// then keeps it (a rule for the table came back).
func (ls *Lanes) Retire(name string) {
	if ls == nil {
		return
	}
	ls.mu.Lock()
	l := ls.byID[name]
	ls.mu.Unlock()
	if l == nil {
		return
	}
	l.mu.Lock()
	l.retiring = true
	l.mu.Unlock()
	l.signal()
}

// retire removes l when it still is retiring and holds nothing, and
// deletes its checkpoint row; false when a push came first.
func (ls *Lanes) retire(ctx context.Context, l *lane) bool {
	ls.mu.Lock()
	l.mu.Lock()
	ok := l.retiring && len(l.queue) == 0 && !l.closed
	if ok {
		delete(ls.byID, l.name)
		l.closed = true
	}
	l.mu.Unlock()
	ls.mu.Unlock()
	if !ok {
		return false
	}
	if err := l.w.Forget(ctx); err != nil && ctx.Err() == nil {
		ls.cfg.Log.Warn("deleting a retired lane's checkpoint failed; it stays, unused", "lane", l.name, "err", err)
	}
	ls.cfg.Log.Info("lane retired: no rule writes its target any more", "lane", l.name)
	return true
}

// get returns the lane of target table name, starting it when new.
func (ls *Lanes) get(name string) *lane {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.getLocked(name)
}

// getLocked is get with ls.mu held.
func (ls *Lanes) getLocked(name string) *lane {
	if l, ok := ls.byID[name]; ok {
		return l
	}
	l := newLane(name, ls.cfg.NewWriter(name), ls)
	ls.byID[name] = l
	ls.wg.Add(1)
	go func() {
		defer ls.wg.Done()
		defer l.w.Close(context.WithoutCancel(ls.ctx))
		if err := l.run(ls.ctx); err != nil && ls.ctx.Err() == nil {
			err = fmt.Errorf("lane %s: %w", name, err)
			if f := ls.onFail.Load(); f != nil {
				(*f)(fmt.Errorf("apply: %w", err))
			}
			select {
			case ls.errs <- err:
			default:
			}
		}
	}()
	return l
}

// Failed returns the channel of lane failures.
func (ls *Lanes) Failed() <-chan error { return ls.errs }

// Drain closes every lane and waits until they have written what they hold
// (or ctx of the lanes ends).
func (ls *Lanes) Drain() {
	ls.mu.Lock()
	for _, l := range ls.byID {
		l.close()
	}
	ls.mu.Unlock()
	ls.wg.Wait()
}

// all returns the lanes.
func (ls *Lanes) all() []*lane {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	out := make([]*lane, 0, len(ls.byID))
	for _, l := range ls.byID {
		out = append(out, l)
	}
	return out
}

// Status reports every lane for metrics and status.
func (ls *Lanes) Status() []metrics.Lane {
	var out []metrics.Lane
	for _, l := range ls.all() {
		out = append(out, l.status())
	}
	return out
}

// Totals are the counters of all lanes: ops written, target transactions,
// errors rows.
func (ls *Lanes) Totals() (ops, batches, errorsRows int64) {
	for _, l := range ls.all() {
		ops += l.stat.written.Load()
		batches += l.stat.batches.Load()
		errorsRows += l.stat.errorsN.Load()
	}
	return ops, batches, errorsRows
}

// status reports a lane for metrics and status.
func (l *lane) status() metrics.Lane {
	l.stat.mu.Lock()
	pos, at := l.stat.pos, l.stat.commitTime
	l.stat.mu.Unlock()
	queued, first := l.first()
	writing := l.stat.writing.Load()
	st := metrics.Lane{Name: l.name, Pending: int64(queued) + writing, Applied: uint64(pos.Commit), CommitTime: at}
	if st.Pending > 0 {
		st.Stalled = max(time.Since(time.Unix(0, l.stat.progress.Load())), 0)
	}
	switch {
	case writing > 0:
		st.Oldest = time.Unix(0, l.stat.oldest.Load())
	case queued > 0:
		st.Oldest = first
	}
	return st
}
