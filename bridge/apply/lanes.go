package apply

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgimageai/pgimageai/bridge/cost"
	"github.com/pgimageai/pgimageai/bridge/track"
	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/internal/supervise"
	"github.com/pgimageai/pgimageai/metrics"
)

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
	sp         supervise.Spawner           // starts the lanes' goroutines

	mu   sync.Mutex
	byID map[string]*lane
	wg   sync.WaitGroup
	errs chan error // the first failure of each lane
}

// New returns the lanes of cfg, whose goroutines sp starts: each ends when
// the lane is closed and has written what it holds — at Drain, or at sp's
// drain signal — or at sp's hard stop.
func New(sp supervise.Spawner, cfg Config) *Lanes {
	return &Lanes{cfg: cfg, sp: sp, repaired: make(chan string, 16), unwritable: make(chan string, 1), byID: map[string]*lane{}, errs: make(chan error, 64)}
}

// SetTargets sets what the lanes ask of the rules of their targets (see
// Config.Targets); set before the first Push.
func (ls *Lanes) SetTargets(t Targets) { ls.cfg.Targets = t }

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
	ls.sp.Go("lane "+name, func(ctx context.Context) error {
		defer ls.wg.Done()
		defer l.w.Close(context.WithoutCancel(ctx))
		err := l.run(ctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
		err = fmt.Errorf("lane %s: %w", name, err)
		if f := ls.onFail.Load(); f != nil {
			(*f)(fmt.Errorf("apply: %w", err))
		}
		select {
		case ls.errs <- err:
		default:
		}
		return err
	})
	return l
}

// Failed returns the channel of lane failures.
func (ls *Lanes) Failed() <-chan error { return ls.errs }

// Drain closes every lane and waits until they have written what they hold
// (or the hard stop of their spawner).
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
