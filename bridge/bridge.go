package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge/apply"
	"github.com/pgimageai/pgimageai/bridge/calls"
	"github.com/pgimageai/pgimageai/bridge/cost"
	"github.com/pgimageai/pgimageai/bridge/engine"
	"github.com/pgimageai/pgimageai/bridge/leader"
	"github.com/pgimageai/pgimageai/bridge/park"
	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/bridge/track"
	"github.com/pgimageai/pgimageai/internal/backoff"
	"github.com/pgimageai/pgimageai/internal/circuit"
	"github.com/pgimageai/pgimageai/internal/reconn"
	"github.com/pgimageai/pgimageai/internal/supervise"
	"github.com/pgimageai/pgimageai/metrics"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

// Defaults of Config.
const (
	DefaultByteBudget   = 256 << 20
	DefaultBatchOps     = 2000
	DefaultCacheEntries = 10000
	DefaultCacheBytes   = 16 << 20
	DefaultDrainTimeout = 2 * time.Minute
	DefaultLeaderPoll   = time.Second
	// DefaultRecheckInterval: see Timing.RecheckInterval.
	DefaultRecheckInterval = 30 * time.Second
	// DefaultRevalidateInterval: see Timing.RevalidateInterval.
	DefaultRevalidateInterval = 5 * time.Second
	DefaultPaceReport         = 5 * time.Second
	DefaultStallAfter         = 10 * time.Minute
)

// Config configures a Bridge.
type Config struct {
	SourceDSN string // where the rules, the slot and the source tables live
	TargetDSN string // where results, errors and checkpoints go; "" = SourceDSN
	Stream
	Providers
	Logger *slog.Logger
	// Metrics receives counters and the bridge's status; nil = none.
	Metrics *metrics.Metrics
	// Version is the build's version, for the start-up line.
	Version string
	Limits  Limits
	Timing  Timing
	Trust   Trust
	Outage  Outage
}

// Stream names what a Bridge streams: its slot, publication and rule group.
type Stream struct {
	Slot        string
	Publication string
	// Group is the rule group to stream (rules.rule_group); "" = default.
	// Each group needs a slot and publication of its own.
	Group string
}

// Providers is where a Bridge finds its models: the registry of provider
// kinds and the environment their keys are read from.
type Providers struct {
	Registry *provider.Registry
	Env      provider.Env
}

// Trust names what of the database's other roles the operator trusts the
// bridge's role to run.
type Trust struct {
	// Tables names tables (as rules name them) whose owners' code the
	// bridge's role may run: the triggers, rules and functions that a
	// write-back UPDATE fires, the functions of the constraints of its
	// columns' domains. Any other table with such code is an invalid_rule.
	Tables []string
}

// Outage sets how a model's outage is told from one row's failure and how
// a model that is down is probed (internal/circuit); zero fields take the
// defaults.
type Outage struct {
	// Threshold is how many unreachable requests in a row, of at least two
	// rows and with no answer between, make a model down (default 3).
	Threshold int
	// ProbeMin and ProbeMax bound the wait between two probes of a model
	// that is down: from ProbeMin (default 1s), doubled after each failed
	// probe, up to ProbeMax (default 30s).
	ProbeMin, ProbeMax time.Duration
}

// Limits bound what a Bridge holds.
type Limits struct {
	ByteBudget   int64 // bytes of images in flight; default 256 MiB
	BatchOps     int   // target ops per transaction before a flush; default 2000
	CacheEntries int   // results remembered; default 10000; negative = off
	CacheBytes   int64 // bytes of results remembered; default 16 MiB
	// ReadColumnsOnly makes the publication carry only the columns rules
	// read (PostgreSQL 15+ column lists): a huge value in another column
	// never reaches the bridge. Default off: while a column is listed, the
	// application can neither drop it nor change its type (see
	// rules.Live.PublishReadColumns).
	ReadColumnsOnly bool
}

// Timing sets a Bridge's intervals and timeouts.
type Timing struct {
	DrainTimeout time.Duration // how long a graceful stop waits for calls in flight
	// StatusInterval is how often the stream reports its position; 0 = the
	// replication default.
	StatusInterval time.Duration
	// LeaderPoll is how often a standby tries the leader lock and a leader
	// checks it still holds it (default 1s).
	LeaderPoll time.Duration
	// RecheckInterval is how often invalid rules are checked again while
	// the stream is between transactions, so that a rule whose table or
	// column is created later starts without a rule change (default 30s).
	RecheckInterval time.Duration
	// RevalidateInterval is how often the replica identities of the
	// followed tables are read again (default 5s): a table whose identity
	// no longer carries a key leaves the publication within it, so that the
	// application's UPDATEs and DELETEs on it work again (see
	// rules.Live.Revalidate).
	RevalidateInterval time.Duration
	// PaceReport is how often the models' pacing is stored for status and
	// checked for the log's rate-limited and recovered lines (default 5s).
	PaceReport time.Duration
	// StallAfter is how long a lane may hold changes without writing any
	// before /healthz says "stalled" (default 10m; negative = never).
	StallAfter time.Duration
	// FailoverWait is how long the bridge waits, reconnecting, while a
	// failover of the source settles — no server reachable, the server a
	// standby, the slot not there yet — before it stops with what to do
	// (default 5m).
	FailoverWait time.Duration
	// Now is the clock of the models' daily budgets (default time.Now).
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.TargetDSN == "" {
		c.TargetDSN = c.SourceDSN
	}
	l, t := &c.Limits, &c.Timing
	if l.ByteBudget <= 0 {
		l.ByteBudget = DefaultByteBudget
	}
	if l.BatchOps <= 0 {
		l.BatchOps = DefaultBatchOps
	}
	if l.CacheEntries == 0 {
		l.CacheEntries = DefaultCacheEntries
	}
	if l.CacheBytes <= 0 {
		l.CacheBytes = DefaultCacheBytes
	}
	if t.DrainTimeout <= 0 {
		t.DrainTimeout = DefaultDrainTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if t.LeaderPoll <= 0 {
		t.LeaderPoll = DefaultLeaderPoll
	}
	if c.Timing.Now == nil {
		c.Timing.Now = time.Now
	}
	if t.RecheckInterval <= 0 {
		t.RecheckInterval = DefaultRecheckInterval
	}
	if t.RevalidateInterval <= 0 {
		t.RevalidateInterval = DefaultRevalidateInterval
	}
	if t.PaceReport <= 0 {
		t.PaceReport = DefaultPaceReport
	}
	if t.StallAfter == 0 {
		t.StallAfter = DefaultStallAfter
	}
	if t.FailoverWait <= 0 {
		t.FailoverWait = replication.DefaultFailoverWait
	}
	return c
}

// Stats are counters of a Bridge, for logs, status and tests.
type Stats struct {
	Changes    int64 // row changes read
	Calls      int64 // provider calls made
	CacheHits  int64 // calls saved by the cache or an identical call in flight
	OpsWritten int64
	Batches    int64
	Errors     int64 // errors rows written
	PeakBytes  int64 // highest bytes of images in flight
	Unchanged  int64 // calls saved because the stored result had the same input
	Dropped    int64 // queued calls of rules deleted, disabled or changed, not sent
}

// Bridge streams changes of the source tables of the enabled rules through
// their functions into the target tables.
type Bridge struct {
	cfg  Config
	run  atomic.Pointer[running] // of the current leadership, for status and Stats
	lock *leader.Lock

	mu     sync.Mutex          // guards stream and reconnects, for status
	stream *replication.Stream // of the current leadership; nil when none
	// reconnects of the streams of earlier leaderships, so that the
	// metric stays monotonic across a step-down
	reconnects int64
}

// New returns a Bridge; Run starts it.
func New(cfg Config) *Bridge {
	return &Bridge{cfg: cfg.withDefaults()}
}

// ErrLeadershipLost reports that another pgimageai took the slot's leader
// lock while this one had lost its connection to the source.
var ErrLeadershipLost = leader.ErrLeadershipLost

// Run waits for the slot's leader lock (as a standby while another
// instance holds it), then checks the source, loads the rules, prepares the
// targets, the publication and the slot, and streams until ctx ends. A
// cancelled ctx is a graceful stop: transactions already read are finished,
// written and confirmed, and Run returns nil. Any other return is a
// failure. A leader that loses its lock to another instance stops at once
// and becomes a standby again.
func (b *Bridge) Run(ctx context.Context) error {
	b.lock = leader.New(b.cfg.SourceDSN, b.cfg.Slot, b.cfg.Logger, b.cfg.Timing.LeaderPoll)
	defer b.lock.Release()
	b.cfg.Metrics.SetStatus(b.status)
	b.cfg.Metrics.SetOutages(b.outages)
	var settling time.Time // since when the source has been settling
	for {
		began := time.Now()
		err := b.lock.Acquire(ctx)
		if err != nil && ctx.Err() != nil {
			return nil // stopped while a standby: nothing to finish
		}
		if err == nil {
			if err = b.lead(ctx); err == nil || ctx.Err() != nil {
				return err
			}
		}
		if time.Since(began) > b.cfg.Timing.FailoverWait {
			settling = time.Time{} // it led for a while: a new outage
		}
		switch {
		case errors.Is(err, ErrLeadershipLost):
			b.cfg.Logger.Warn("stepping down to standby", "slot", b.cfg.Slot, "err", err)
			continue
		case errors.Is(err, apply.ErrSwitchFailed):
			b.cfg.Logger.Warn("a version switch failed; starting over from the checkpoint, where it is checked again", "slot", b.cfg.Slot, "err", err)
			continue
		case errors.Is(err, replication.ErrFailoverTimeout) || errors.Is(err, replication.ErrNoSlot) || !replication.Settling(err):
			return err
		}
		// The server reached is a standby: a failover under way, or a DSN
		// that lists only standbys.
		if settling.IsZero() {
			settling = time.Now()
		}
		if waited := time.Since(settling); waited >= b.cfg.Timing.FailoverWait {
			return fmt.Errorf("%w after waiting %s for a failover to end: %w", replication.ErrFailoverTimeout, waited.Round(time.Second), err)
		}
		b.cfg.Logger.Warn("the source is a standby; waiting for a failover to end", "slot", b.cfg.Slot, "err", err,
			"waited", time.Since(settling).Round(time.Second), "limit", b.cfg.Timing.FailoverWait)
		if backoff.Wait(ctx, time.Second) != nil {
			return nil
		}
	}
}

// status reports the bridge's state to metrics.
func (b *Bridge) status() metrics.Status {
	st := metrics.Status{Leader: b.lock != nil && b.lock.Held(), Standby: b.lock != nil && b.lock.Standby()}
	b.mu.Lock()
	st.Reconnects = b.reconnects
	if s := b.stream; s != nil {
		rs := s.Status()
		st.Streaming, st.ServerWALEnd, st.Confirmed = rs.Streaming, uint64(rs.ServerWALEnd), uint64(rs.Confirmed)
		st.Reconnects += rs.Reconnects
	}
	b.mu.Unlock()
	if r := b.run.Load(); r != nil && st.Leader {
		st.BytesInFlight, _ = r.budget.InUse()
		_, st.Applied, _ = r.tracker.State()
		st.Lanes = r.lanes.Status()
		st.StallAfter = max(b.cfg.Timing.StallAfter, 0)
		sort.Slice(st.Lanes, func(i, j int) bool { return st.Lanes[i].Name < st.Lanes[j].Name })
		st.Models = models(r.engine.Governors())
	}
	return st
}

// running is what status and Stats read of the current leadership.
type running struct {
	budget  *cost.Budget
	tracker *track.Tracker
	lanes   *apply.Lanes
	engine  *engine.Engine
	calls   *calls.Counters
	breaker *circuit.Breaker // the models' circuits
	parked  *park.Rules      // the rules' parked rows
}

// setStream records the stream of the current leadership (nil: none), for
// status.
func (b *Bridge) setStream(s *replication.Stream) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stream != nil {
		b.reconnects += b.stream.Status().Reconnects
	}
	b.stream = s
}

// lead is Run while this instance holds the leader lock: prepare what the
// leadership starts from, start its goroutines under one supervisor, run
// the pipeline until ctx ends or a stage fails, then stop: every goroutine
// of the leadership has returned before lead does, so the next leadership
// never meets a writer of this one.
func (b *Bridge) lead(ctx context.Context) error {
	p, err := b.prepare(ctx)
	if err != nil {
		return err
	}
	defer p.close(context.WithoutCancel(ctx))
	sup := supervise.New()
	pl, err := b.start(ctx, sup, p)
	if err == nil {
		err = pl.run(ctx, sup)
		pl.eng.StopWatch() // its reconciliations end with the leadership
	}
	// A graceful stop has drained the lanes: what is left gets its drain
	// signal and DrainTimeout; any other end is the hard stop at once.
	deadline := time.Duration(0)
	if err == nil {
		deadline = b.cfg.Timing.DrainTimeout
	}
	if serr := sup.Stop(deadline); err == nil && serr != nil && ctx.Err() == nil {
		err = serr
	}
	b.setStream(nil)
	if err != nil {
		return err
	}
	s := b.Stats()
	confirmed, _, _ := p.resume.Tracker.State()
	b.cfg.Logger.Info("stopped", "checkpoint", max(confirmed, p.checkpoint).String(), "changes", s.Changes, "calls", s.Calls, "cache_hits", s.CacheHits, "unchanged", s.Unchanged)
	return nil
}

// recreate makes the target table and result columns of rs again, as at
// rule load, after a write found them missing (dropped while the bridge
// ran). It runs on the lane's goroutine, on a connection of its own.
func recreate(ctx context.Context, dsn string, rs []*rules.Rule) error {
	if len(rs) == 0 {
		return nil
	}
	conn := reconn.New("target", dsn, nil)
	defer conn.Drop(context.WithoutCancel(ctx))
	return conn.Do(ctx, func(c *pgx.Conn) error {
		for _, r := range rs {
			if _, err := sink.Ensure(ctx, c, r.Target.Name(), r.Source, r.Target.Column, r.Target.Type, false); err != nil {
				return err
			}
		}
		return nil
	})
}

// rulesAlive reports whether one of rs is still an enabled rule in
// pgimageai.rules now, whatever the stream has read so far.
func rulesAlive(ctx context.Context, dsn string, rs []*rules.Rule) (bool, error) {
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = r.Name
	}
	conn := reconn.New("source", dsn, nil)
	defer conn.Drop(context.WithoutCancel(ctx))
	var alive bool
	err := conn.Do(ctx, func(c *pgx.Conn) error {
		var err error
		alive, err = state.RulesEnabled(ctx, c, names)
		return err
	})
	return alive, err
}

// Stats returns the bridge's counters. It is safe to call while Run runs.
func (b *Bridge) Stats() Stats {
	r := b.run.Load()
	if r == nil {
		return Stats{}
	}
	_, peak := r.budget.InUse()
	s := Stats{Changes: r.engine.Changes(), Calls: r.calls.Calls.Load(), CacheHits: r.calls.Hits.Load(), PeakBytes: peak,
		Unchanged: r.calls.Unchanged.Load(), Dropped: r.calls.Dropped.Load()}
	s.OpsWritten, s.Batches, s.Errors = r.lanes.Totals()
	return s
}

// DefaultGroup is the rule group of a rule that names none, and of a bridge
// run without a group.
const DefaultGroup = rules.DefaultGroup

// spawnFunc is an engine.Spawner of a func.
type spawnFunc func(name string, run func(ctx context.Context) error)

func (f spawnFunc) Go(name string, run func(ctx context.Context) error) { f(name, run) }
