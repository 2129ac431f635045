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
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

// laneWriter is what a lane needs of the sink.
type laneWriter interface {
	Write(ctx context.Context, ops []sink.Op, pos state.Position, commitTime time.Time) error
	Close(ctx context.Context) error
}

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
		maxOps: l.maxOps, backoff: l.backoff, repair: l.repair, repaired: l.repaired, own: l.own, rows: &l.rows, wake: make(chan struct{}, 1)}
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
// lane.
func (l *lane) take() (items []item, wait <-chan struct{}, done bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for n < len(l.queue) && n < l.maxOps && l.queue[n].ready() {
		n++
	}
	if n == 0 {
		if len(l.queue) == 0 {
			return nil, nil, l.closed
		}
		c := l.queue[0].notReady()
		if c == nil { // it became ready since the loop looked: take it next time
			ready := make(chan struct{})
			close(ready)
			return nil, ready, false
		}
		return nil, c.done, false
	}
	items = make([]item, n)
	copy(items, l.queue[:n])
	clear(l.queue[:n]) // results are held by items only until written
	l.queue = l.queue[n:]
	return items, nil, false
}

// run writes the lane's items until ctx ends or the lane is closed and
// empty.
func (l *lane) run(ctx context.Context) error {
	for {
		items, wait, done := l.take()
		if done {
			return nil
		}
		if len(items) == 0 {
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

// batch turns the items of one lane write into sink ops: results with their
// errors rows or resolutions, deletes, moves, truncates, backfill progress,
// and the provider usage of the calls they hold.
type batch struct {
	ops     []sink.Op
	usage   map[[2]string]*state.Usage // by rule and model
	own     bool                       // writes a source table (write-back)
	rows    map[string]int             // by op, for metrics
	reasons map[string]int             // errors rows by reason, for metrics
	errorsN int
}

// add appends the ops of one item.
func (b *batch) add(it *item) {
	switch it.kind {
	case itemMove:
		b.ops = append(b.ops, sink.Move{Target: it.target, OldKey: it.oldKey, NewKey: it.key},
			state.RekeyErrors{SourceTable: it.sourceTable, OldKey: it.oldKeyJSON, NewKey: it.keyJSON, Rules: it.rules})
		b.count("move")
	case itemDelete:
		b.ops = append(b.ops, sink.Delete{Target: it.target, Key: it.key},
			state.ForgetRow{SourceTable: it.sourceTable, Key: it.keyJSON, Rules: it.rules})
		b.count("delete")
	case itemTruncate:
		b.ops = append(b.ops, sink.Truncate{Target: it.target}, state.ForgetRow{SourceTable: it.sourceTable, Rules: it.rules})
		b.count("truncate")
	case itemResult:
		b.result(it)
	case itemBackfill:
		b.ops = append(b.ops, it.progress)
	case itemResolve:
		b.ops = append(b.ops, state.Resolve{Rule: it.rule.Name, Key: it.keyJSON})
	}
}

func (b *batch) count(op string) {
	if b.rows == nil {
		b.rows = map[string]int{}
	}
	b.rows[op]++
}

// result appends the ops of one function result: the value (NULL on
// failure), and the errors row or the resolution of earlier ones.
func (b *batch) result(it *item) {
	if it.call != nil && it.call.unchanged {
		return // the stored result is this input's: nothing to write
	}
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
	b.ops = append(b.ops, sink.Upsert{Target: it.target, Key: it.key, Value: value})
	b.own = b.own || it.target.WriteBack
	b.count("upsert")
	if it.call != nil && !it.call.hit && it.call.err == nil {
		b.countUsage(it.rule, res.Usage)
	}
	input := state.ResultInput{Rule: it.rule.Name, Key: it.keyJSON}
	if err == nil && !res.Null && it.call != nil && it.call.key != nil {
		input.InputKey = it.call.key[:]
	}
	b.ops = append(b.ops, input)
	if err == nil {
		b.ops = append(b.ops, state.Resolve{Rule: it.rule.Name, Key: it.keyJSON})
		return
	}
	b.errorsN++
	row := state.Error{Rule: it.rule.Name, SourceTable: it.sourceTable, Key: it.keyJSON, LSN: it.lsn,
		Reason: string(functions.ProviderError), Detail: err.Error()}
	var fe *functions.Error
	if errors.As(err, &fe) {
		row.Reason, row.Detail = string(fe.Reason), fe.Detail
		if fe.ImageBytes >= 0 {
			n := fe.ImageBytes
			row.ImageBytes, row.ImageHead = &n, fe.ImageHead
		}
	}
	if it.call != nil && it.call.key != nil && functions.Permanent(err) {
		row.InputKey = it.call.key[:]
		if row.ImageBytes == nil { // a failure remembered from an earlier run
			n := it.call.size
			row.ImageBytes, row.ImageHead = &n, it.call.head
		}
	}
	if b.reasons == nil {
		b.reasons = map[string]int{}
	}
	b.reasons[row.Reason]++
	b.ops = append(b.ops, row)
}

// countUsage adds one answered call and its tokens to the batch's usage.
// Calls served by the cache cost nothing and are not counted.
func (b *batch) countUsage(r *Rule, u provider.Usage) {
	if b.usage == nil {
		b.usage = map[[2]string]*state.Usage{}
	}
	k := [2]string{r.Name, r.Model}
	agg := b.usage[k]
	if agg == nil {
		agg = &state.Usage{Rule: r.Name, Model: r.Model}
		b.usage[k] = agg
	}
	agg.Calls++
	agg.PromptTokens += int64(u.PromptTokens)
	agg.CompletionTokens += int64(u.CompletionTokens)
}

// final returns the batch's ops: the OwnWrites marker first when the batch
// writes to a source table (write-back), so that the bridge ignores those
// changes when it reads them back from the WAL (note receives the
// transaction's ID), and the usage last.
func (b *batch) final(note func(xid uint32)) []sink.Op {
	ops := b.ops
	if b.own {
		ops = append([]sink.Op{state.OwnWrites{Note: note}}, ops...)
	}
	for _, u := range b.usage {
		ops = append(ops, *u)
	}
	return ops
}
