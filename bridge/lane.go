package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/internal/backoff"
	"github.com/pgimageai/pgimageai/internal/pgerr"
	"github.com/pgimageai/pgimageai/metrics"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

// laneWriter is what a lane needs of the sink.
type laneWriter interface {
	Write(ctx context.Context, ops []sink.Op, pos state.Position, commitTime time.Time) error
	Close(ctx context.Context) error
}

// A lane whose ready prefix is short while the call right behind it is in
// flight waits up to lingerFor (or until lingerRows are ready) before it
// writes: under load, a target transaction then holds ~140 rows rather
// than ~28, and each transaction costs the database ~0.8 ms of CPU of its
// own (BenchmarkFastPath: 23 µs less database CPU per row in catch-up). A
// lane with nothing in flight behind its ready items writes at once, so a
// trickle of changes gets no delay; a provider call takes far longer than
// lingerFor anyway.
const (
	lingerFor  = 20 * time.Millisecond
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

// lane applies the items of one target table in source order (SPEC §5):
// rules that share a target table share a lane, so a DELETE never overtakes
// an upsert of the same row. It writes the ready prefix of its queue as soon
// as the calls of that prefix have finished, in chunks of at most maxOps
// items, each in one target transaction with the lane's checkpoint — so a
// slow model holds back only its own lane, and a big source transaction is
// written as it completes, never held to its end.
//
// push is called by the engine's goroutine; run by the lane's own.
type lane struct {
	name    string
	log     *slog.Logger
	w       laneWriter
	budget  *budget
	tracker *tracker
	metrics *metrics.Metrics
	maxOps  int
	backoff time.Duration
	// repair is called when a write finds the target table or column
	// missing (dropped while the bridge ran); it makes them again, and the
	// lane's name goes on repaired so that the engine backfills its rules.
	repair   func(ctx context.Context, lane string) error
	repaired chan<- string
	own      func(xid uint32) // receives the IDs of write-back transactions
	rows     *rowCounts       // items waiting per row, across lanes

	mu     sync.Mutex
	queue  []item
	closed bool          // no more items: drain and stop
	wake   chan struct{} // signalled by push and close
	stop   chan struct{} // closed by close: a held prefix is written at once
	// linger is how long a short ready prefix may wait for the calls
	// behind it (lingerFor; 0 = never); lingering is when it began.
	linger    time.Duration
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
}

func newLane(name string, w laneWriter, l *lanes) *lane {
	return &lane{name: name, log: l.log, w: w, budget: l.budget, tracker: l.tracker, metrics: l.metrics,
		maxOps: l.maxOps, linger: l.linger, backoff: l.backoff, repair: l.repair, repaired: l.repaired, own: l.own, rows: &l.rows, wake: make(chan struct{}, 1), stop: make(chan struct{})}
}

// push appends an item at the end of the lane.
func (l *lane) push(it item) {
	l.mu.Lock()
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

// pending returns the items the lane holds.
func (l *lane) pending() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queue)
}

// take removes and returns the ready prefix of the queue, at most maxOps
// items. When nothing is ready it returns what to wait for: the first
// item's call, or nothing (wait for a push); done reports a closed, empty
// lane. A short ready prefix with a call in flight right behind it is held
// (see lingerFor): take returns that call and how much longer to wait.
func (l *lane) take(now time.Time) (items []item, wait <-chan struct{}, hold time.Duration, done bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for n < len(l.queue) && n < l.maxOps && l.queue[n].ready() {
		n++
	}
	// The prefix stopped at an item that is not ready (not at maxOps).
	blocked := n < len(l.queue) && n < l.maxOps
	if n > 0 && n < lingerRows && blocked && !l.closed && l.linger > 0 {
		if l.lingering.IsZero() {
			l.lingering = now
		}
		if left := l.linger - now.Sub(l.lingering); left > 0 {
			if c := l.queue[n].notReady(); c != nil {
				return nil, c.done, left, false
			}
			return nil, closedChan, 0, false // it became ready since the loop looked
		}
	}
	l.lingering = time.Time{}
	if n == 0 {
		if len(l.queue) == 0 {
			return nil, nil, 0, l.closed
		}
		c := l.queue[0].notReady()
		if c == nil { // it became ready since the loop looked: take it next time
			return nil, closedChan, 0, false
		}
		return nil, c.done, 0, false
	}
	items = make([]item, n)
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
	for {
		items, wait, hold, done := l.take(time.Now())
		if done {
			return nil
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
			select {
			case <-wait: // nil when waiting for a push: only wake fires
			case <-l.wake:
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		if err := l.write(ctx, items); err != nil {
			return err
		}
	}
}

// write writes items in one target transaction, retrying with backoff until
// it succeeds or ctx ends, then releases their budget and marks them done.
func (l *lane) write(ctx context.Context, items []item) error {
	var b batch
	for i := range items {
		b.add(&items[i])
	}
	ops := b.final(l.own)
	last := items[len(items)-1]
	err := l.commit(ctx, ops, last)
	if errors.Is(err, errRefused) {
		return l.isolate(ctx, items, err)
	}
	if err != nil {
		return err
	}
	var cost int64
	for i := range items {
		cost += items[i].cost
	}
	l.budget.release(cost)
	for i := range items {
		l.rows.done(l.name, rowsOf(&items[i])...)
	}
	for i := 0; i < len(items); {
		j := i + 1
		for j < len(items) && items[j].rec == items[i].rec {
			j++
		}
		l.tracker.done(items[i].rec, j-i)
		i = j
	}
	l.stat.mu.Lock()
	l.stat.pos, l.stat.commitTime = last.pos, last.rec.commitTime
	l.stat.mu.Unlock()
	l.stat.written.Add(int64(len(ops)))
	l.stat.batches.Add(1)
	l.stat.errorsN.Add(int64(b.errorsN))
	l.metrics.Written(b.rows, b.reasons)
	return nil
}

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
// together, so that one row the target cannot take never holds the lane (SPEC
// §5: one bad row never blocks the stream): a result it refuses is written
// as a NULL with a bad_response errors row saying why. Any other item it
// refuses stops the lane: dropping a delete or a move would lose a change.
func (l *lane) isolate(ctx context.Context, items []item, err error) error {
	if len(items) > 1 {
		for i := range items {
			if err := l.write(ctx, items[i:i+1]); err != nil {
				return err
			}
		}
		return nil
	}
	it := &items[0]
	if it.kind != itemResult || (it.call != nil && it.call.err != nil) {
		return err // refused again as an errors row, or not a result: stop
	}
	size, head := 0, []byte(nil)
	if it.call != nil {
		size, head = it.call.size, it.call.head
	}
	l.log.Error("the target refused a result; writing it as a bad_response", "lane", l.name, "key", string(it.keyJSON), "err", err)
	it.call = failedCall(&functions.Error{Reason: functions.BadResponse, ImageBytes: size, ImageHead: head,
		Detail: fmt.Sprintf("model %s: the target column %s.%s refused the answer: %s", it.rule.Model, it.target.Name(), it.target.Column, refusal(err))}, size, head)
	return l.write(ctx, items)
}

// commit writes ops in one target transaction with last's position,
// retrying with backoff until it succeeds, ctx ends, the lane is fenced, or
// the target refuses what it holds (errRefused).
func (l *lane) commit(ctx context.Context, ops []sink.Op, last item) error {
	bo := backoff.Backoff{Min: l.backoff, Max: maxWriteBackoff}
	for attempt := 1; ; attempt++ {
		err := l.w.Write(ctx, ops, last.pos, last.rec.commitTime)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, state.ErrFenced) {
			return fmt.Errorf("%w: %w", ErrLeadershipLost, err)
		}
		if refused(err) {
			return fmt.Errorf("%w: %w", errRefused, err)
		}
		l.log.Error("target write failed; retrying", "lane", l.name, "attempt", attempt, "ops", len(ops), "position", last.pos.String(), "err", err)
		if missingTarget(err) && l.repair != nil {
			if rerr := l.repair(ctx, l.name); rerr != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				l.log.Error("re-creating the target failed", "lane", l.name, "err", rerr)
			} else {
				l.log.Warn("target table or column was missing; re-created it", "lane", l.name)
				select {
				case l.repaired <- l.name:
				default: // a backfill of the lane is requested already
				}
			}
		}
		if err := bo.Sleep(ctx); err != nil {
			return err
		}
	}
}

// missingTarget reports a write that failed because its target table or
// column does not exist (SQLSTATE 42P01 undefined_table, 42703
// undefined_column).
func missingTarget(err error) bool {
	code := pgerr.SQLState(err)
	return code == "42P01" || code == "42703"
}

// lanes is the registry of lanes by target table. get and close are called
// by the engine's goroutine; status by anyone.
type lanes struct {
	log       *slog.Logger
	newWriter func(lane string) laneWriter
	budget    *budget
	tracker   *tracker
	metrics   *metrics.Metrics
	maxOps    int
	linger    time.Duration // see lingerFor; 0 = write at once
	backoff   time.Duration
	repair    func(ctx context.Context, lane string) error
	repaired  chan string // lanes whose target was re-created, for the engine
	own       func(xid uint32)
	onFail    func(error)     // called with the first failure of any lane
	rows      rowCounts       // items waiting per row of each lane
	ctx       context.Context // the lanes' goroutines end with it

	mu   sync.Mutex
	byID map[string]*lane
	wg   sync.WaitGroup
	errs chan error // the first failure of each lane
}

// get returns the lane of target table name, starting it when new.
func (ls *lanes) get(name string) *lane {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if l, ok := ls.byID[name]; ok {
		return l
	}
	if ls.byID == nil {
		ls.byID = map[string]*lane{}
	}
	if ls.errs == nil {
		ls.errs = make(chan error, 64)
	}
	l := newLane(name, ls.newWriter(name), ls)
	ls.byID[name] = l
	ls.wg.Add(1)
	go func() {
		defer ls.wg.Done()
		defer l.w.Close(context.WithoutCancel(ls.ctx))
		if err := l.run(ls.ctx); err != nil && ls.ctx.Err() == nil {
			err = fmt.Errorf("lane %s: %w", name, err)
			if ls.onFail != nil {
				ls.onFail(fmt.Errorf("apply: %w", err))
			}
			select {
			case ls.errs <- err:
			default:
			}
		}
	}()
	return l
}

// failed returns the channel of lane failures.
func (ls *lanes) failed() <-chan error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.errs == nil {
		ls.errs = make(chan error, 64)
	}
	return ls.errs
}

// drain closes every lane and waits until they have written what they hold
// (or ctx of the lanes ends).
func (ls *lanes) drain() {
	ls.mu.Lock()
	for _, l := range ls.byID {
		l.close()
	}
	ls.mu.Unlock()
	ls.wg.Wait()
}

// all returns the lanes, for status.
func (ls *lanes) all() []*lane {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	out := make([]*lane, 0, len(ls.byID))
	for _, l := range ls.byID {
		out = append(out, l)
	}
	return out
}

// status reports a lane for metrics and status.
func (l *lane) status() metrics.Lane {
	l.stat.mu.Lock()
	pos, at := l.stat.pos, l.stat.commitTime
	l.stat.mu.Unlock()
	return metrics.Lane{Name: l.name, Pending: int64(l.pending()), Applied: uint64(pos.Commit), CommitTime: at}
}
