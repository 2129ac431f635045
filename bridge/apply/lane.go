package apply

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/internal/supervise"
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

// run writes the lane's items until ctx ends or the lane is closed (by
// close or ctx's drain signal) and empty.
func (l *lane) run(ctx context.Context) error {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	closed := false                  // the connection was given back while idle
	drain := supervise.Draining(ctx) // the soft stop: write what is held, then stop
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
				case <-drain:
					l.close()
					drain = nil
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
			case <-drain:
				l.close()
				drain = nil
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
