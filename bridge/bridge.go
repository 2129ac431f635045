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

	"github.com/pgimageai/pgimageai/functions"
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
	// DefaultRecheckInterval: see Config.RecheckInterval.
	DefaultRecheckInterval = 30 * time.Second
)

// Config configures a Bridge.
type Config struct {
	SourceDSN   string // where the rules, the slot and the source tables live
	TargetDSN   string // where results, errors and checkpoints go; "" = SourceDSN
	Slot        string
	Publication string
	// Group is the rule group to stream (rules.rule_group); "" = default.
	// Each group needs a slot and publication of its own.
	Group        string
	Registry     *provider.Registry
	Env          provider.Env
	ByteBudget   int64         // bytes of images in flight; default 256 MiB
	BatchOps     int           // target ops per transaction before a flush; default 2000
	CacheEntries int           // results remembered; default 10000; negative = off
	CacheBytes   int64         // bytes of results remembered; default 16 MiB
	DrainTimeout time.Duration // how long a graceful stop waits for calls in flight
	Logger       *slog.Logger
	// StatusInterval is how often the stream reports its position; 0 = the
	// replication default.
	StatusInterval time.Duration
	// LeaderPoll is how often a standby tries the leader lock and a leader
	// checks it still holds it (default 1s).
	LeaderPoll time.Duration
	// Now is the clock of the models' daily budgets (default time.Now).
	Now func() time.Time
	// RecheckInterval is how often invalid rules are checked again while
	// the stream is between transactions, so that a rule whose table or
	// column is created later starts without a rule change (default 30s).
	RecheckInterval time.Duration
	// Metrics receives counters and the bridge's status; nil = none.
	Metrics *metrics.Metrics
}

func (c Config) withDefaults() Config {
	if c.TargetDSN == "" {
		c.TargetDSN = c.SourceDSN
	}
	if c.ByteBudget <= 0 {
		c.ByteBudget = DefaultByteBudget
	}
	if c.BatchOps <= 0 {
		c.BatchOps = DefaultBatchOps
	}
	if c.CacheEntries == 0 {
		c.CacheEntries = DefaultCacheEntries
	}
	if c.CacheBytes <= 0 {
		c.CacheBytes = DefaultCacheBytes
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.LeaderPoll <= 0 {
		c.LeaderPoll = DefaultLeaderPoll
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.RecheckInterval <= 0 {
		c.RecheckInterval = DefaultRecheckInterval
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
}

// Bridge streams changes of the source tables of the enabled rules through
// their functions into the target tables.
type Bridge struct {
	cfg    Config
	engine *engine
	lanes  *lanes
	budget *budget
	run    atomic.Pointer[running] // of the current leadership, for status

	mu     sync.Mutex          // guards stream and reconnects, for status
	stream *replication.Stream // of the current leadership; nil when none
	// reconnects of the streams of earlier leaderships, so that the
	// metric stays monotonic across a step-down
	reconnects int64
	leader     *leader
}

// New returns a Bridge; Run starts it.
func New(cfg Config) *Bridge {
	return &Bridge{cfg: cfg.withDefaults()}
}

// Run waits for the slot's leader lock (as a standby while another
// instance holds it), then checks the source, loads the rules, prepares the
// targets, the publication and the slot, and streams until ctx ends. A
// cancelled ctx is a graceful stop: transactions already read are finished,
// written and confirmed, and Run returns nil. Any other return is a
// failure. A leader that loses its lock to another instance stops at once
// and becomes a standby again.
func (b *Bridge) Run(ctx context.Context) error {
	b.leader = &leader{dsn: b.cfg.SourceDSN, slot: b.cfg.Slot, log: b.cfg.Logger, poll: b.cfg.LeaderPoll}
	defer b.leader.release()
	b.cfg.Metrics.SetStatus(b.status)
	for {
		if err := b.leader.acquire(ctx); err != nil {
			if ctx.Err() != nil {
				return nil // stopped while a standby: nothing to finish
			}
			return err
		}
		err := b.lead(ctx)
		if !errors.Is(err, ErrLeadershipLost) || ctx.Err() != nil {
			return err
		}
		b.cfg.Logger.Warn("stepping down to standby", "slot", b.cfg.Slot, "err", err)
	}
}

// status reports the bridge's state to metrics.
func (b *Bridge) status() metrics.Status {
	st := metrics.Status{Leader: b.leader != nil && b.leader.held.Load(), Standby: b.leader != nil && b.leader.standby.Load()}
	b.mu.Lock()
	st.Reconnects = b.reconnects
	if s := b.stream; s != nil {
		rs := s.Status()
		st.Streaming, st.ServerWALEnd, st.Confirmed = rs.Streaming, uint64(rs.ServerWALEnd), uint64(rs.Confirmed)
		st.Reconnects += rs.Reconnects
	}
	b.mu.Unlock()
	if r := b.run.Load(); r != nil && st.Leader {
		st.BytesInFlight, _ = r.budget.inUse()
		_, st.Applied, _ = r.tracker.state()
		for _, l := range r.lanes.all() {
			st.Lanes = append(st.Lanes, l.status())
		}
		sort.Slice(st.Lanes, func(i, j int) bool { return st.Lanes[i].Name < st.Lanes[j].Name })
	}
	return st
}

// running is what status reads of the current leadership.
type running struct {
	budget  *budget
	tracker *tracker
	lanes   *lanes
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

// lead is Run while this instance holds the leader lock.
func (b *Bridge) lead(ctx context.Context) error {
	cfg := b.cfg
	log := cfg.Logger
	connect := func(role, dsn string) (*pgx.Conn, error) {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return nil, fmt.Errorf("connect to %s: %w", role, err)
		}
		return conn, nil
	}
	src, err := connect("source", cfg.SourceDSN)
	if err != nil {
		return err
	}
	tgt, err := connect("target", cfg.TargetDSN)
	if err != nil {
		src.Close(ctx)
		return err
	}
	live := &liveConfig{log: log, pub: cfg.Publication, src: src, tgt: tgt, srcDSN: cfg.SourceDSN, tgtDSN: cfg.TargetDSN,
		valid: map[string]*Rule{}, invalid: map[string]string{}}
	live.comp = &compiler{reg: cfg.Registry, env: cfg.Env, providers: map[string]cachedProvider{}}
	defer live.close(context.WithoutCancel(ctx))
	// The checkpointer's writer stores the slot's checkpoint; each lane has
	// a writer of its own.
	cpw := sink.NewWriter(nil, cfg.TargetDSN, cfg.Slot, "")
	defer cpw.Close(context.WithoutCancel(ctx))

	if err := replication.Preflight(ctx, src); err != nil {
		return err
	}
	if live.cfg, err = loadConfig(ctx, src, groupOrDefault(cfg.Group)); err != nil {
		return fmt.Errorf("%w (run pgimageai migrate first)", err)
	}
	// The stream and the calls outlive ctx so that a graceful stop can finish
	// what it read and confirm it; hard bounds them instead.
	hard, cancelHard := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHard()
	eng := &engine{
		log: log, config: map[uint32]bool{}, live: live, typeMap: tgt.TypeMap(),
		budget: newBudget(cfg.ByteBudget), cache: newCache(max(cfg.CacheEntries, 0), cfg.CacheBytes), callCtx: hard,
		rules: newRuleSet(nil), bf: newBackfillState(cfg.SourceDSN, cfg.TargetDSN),
	}
	rulesOID, modelsOID, retriesOID, err := state.TableOIDs(ctx, src)
	if err != nil {
		return fmt.Errorf("%w (run pgimageai migrate first)", err)
	}
	eng.config[rulesOID], eng.config[modelsOID] = true, true
	eng.models, eng.retries = modelsOID, retriesOID
	// The bridge's own write-back transactions that the slot may send again.
	xids, err := state.OwnXacts(ctx, tgt)
	if err != nil {
		return err
	}
	eng.own = newOwnXacts(xids)
	// The publication goes first: pgoutput refuses to decode from before
	// its publication existed. Backfills read rows only once the slot exists.
	live.deferring = true
	if err := live.reload(ctx, eng); err != nil {
		return err
	}
	if err := replication.EnsureSlot(ctx, src, cfg.Slot); err != nil {
		return err
	}
	if err := live.startDeferred(ctx, eng); err != nil {
		return err
	}
	// Permanent failures of earlier runs are not paid for again.
	failed, err := state.PermanentFailures(ctx, live.tgt, max(cfg.CacheEntries, 0))
	if err != nil {
		return err
	}
	for _, f := range failed {
		if len(f.InputKey) == len(cacheKey{}) {
			eng.cache.fail(cacheKey(f.InputKey), &functions.Error{Reason: functions.Reason(f.Reason), Detail: f.Detail, ImageBytes: -1,
				Err: provider.Errorf(provider.Permanent, "%s", f.Detail)})
		}
	}
	checkpoint, err := state.LoadCheckpoint(ctx, live.tgt, cfg.Slot)
	if err != nil {
		return err
	}
	// Each lane resumes after its own checkpoint: what a lane wrote of a
	// transaction the slot has not confirmed is skipped, without a call.
	if eng.routed, err = state.LoadLaneCheckpoints(ctx, live.tgt, cfg.Slot); err != nil {
		return err
	}
	log.Info("streaming", "slot", cfg.Slot, "publication", cfg.Publication, "rules", len(live.valid),
		"invalid_rules", len(live.invalid), "checkpoint", checkpoint.String(), "lanes", len(eng.routed))

	stream := replication.NewStream(replication.Config{
		ConnString: cfg.SourceDSN, Slot: cfg.Slot, Publication: cfg.Publication,
		StatusInterval: cfg.StatusInterval, Logger: log,
	})
	eng.metrics = cfg.Metrics
	eng.lookups = newLookups(cfg.TargetDSN, 4)
	spent, day, err := state.SpentToday(ctx, live.tgt)
	if err != nil {
		return err
	}
	eng.budgets = newBudgets(cfg.Now, day, spent, cfg.Metrics)
	defer eng.lookups.close(context.WithoutCancel(ctx))
	eng.tracker = newTracker(stream.Ack)
	laneCtx, stopLanes := context.WithCancel(hard)
	defer stopLanes()
	eng.lanes = &lanes{
		log: log, budget: eng.budget, tracker: eng.tracker, metrics: cfg.Metrics, maxOps: cfg.BatchOps,
		linger: lingerFor, backoff: 200 * time.Millisecond, ctx: laneCtx, repaired: make(chan string, 16), own: eng.own.add,
		newWriter: func(lane string) laneWriter { return sink.NewWriter(nil, cfg.TargetDSN, cfg.Slot, lane) },
	}
	eng.lanes.repair = func(ctx context.Context, lane string) error {
		return recreate(ctx, cfg.TargetDSN, eng.targetRules(lane))
	}
	b.engine, b.lanes, b.budget = eng, eng.lanes, eng.budget
	b.run.Store(&running{budget: eng.budget, tracker: eng.tracker, lanes: eng.lanes})
	b.setStream(stream)
	defer b.setStream(nil)
	return b.pipeline(ctx, hard, stream, checkpoint, cpw)
}

// engineErr is what stopped the engine: the failure of the stage that
// cancelled it (see failEngine), unless ctx itself ended.
func engineErr(ctx, engCtx context.Context, err error) error {
	if ctx.Err() == nil {
		if cause := context.Cause(engCtx); cause != nil && !errors.Is(cause, context.Canceled) {
			return cause
		}
	}
	return err
}

// errCheckpoint marks a failure of the checkpointer, which has stopped.
var errCheckpoint = errors.New("checkpoint")

// recreate makes the target table and result columns of rules again, as at
// rule load, after a write found them missing (dropped while the bridge
// ran). It runs on the lane's goroutine, on a connection of its own.
func recreate(ctx context.Context, dsn string, rules []*Rule) error {
	if len(rules) == 0 {
		return nil
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect to target: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, r := range rules {
		if _, err := sink.Ensure(ctx, conn, r.Target.Name(), r.Source, r.Target.Column, r.Target.Type, false); err != nil {
			return err
		}
	}
	return nil
}

// pipeline runs stream → engine → lanes until ctx ends or a stage fails.
func (b *Bridge) pipeline(ctx, hard context.Context, stream *replication.Stream, checkpoint replication.LSN, cpw *sink.Writer) error {
	streamCtx, stopStream := context.WithCancel(hard)
	defer stopStream()
	eng := b.engine
	// The engine's work ends with ctx, or as soon as a stage it may be
	// waiting on fails: a dead lane holding budget, a lost leadership, a
	// failed checkpointer — so that the engine, blocked on the budget, does
	// not wait forever for what will never come.
	engCtx, failEngine := context.WithCancelCause(ctx)
	defer failEngine(nil)
	eng.lanes.onFail = failEngine

	events := make(chan replication.Event, 16)
	streamErr := make(chan error, 1)
	go func() { streamErr <- stream.Run(streamCtx, checkpoint, events) }()
	cp := &checkpointer{w: cpw, tracker: eng.tracker, log: b.cfg.Logger, stored: checkpoint}
	cpCtx, stopCheckpointer := context.WithCancel(hard)
	defer stopCheckpointer()
	cpErr := make(chan error, 1)
	go func() {
		err := cp.run(cpCtx)
		if err != nil {
			failEngine(fmt.Errorf("%w: %w", errCheckpoint, err))
		}
		cpErr <- err
	}()
	lost, watched := make(chan error, 1), make(chan error, 1)
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		b.leader.watch(streamCtx, watched)
	}()
	go func() {
		select {
		case err := <-watched:
			failEngine(err)
			lost <- err
		case <-streamCtx.Done():
		}
	}()
	defer func() { // the lock's connection is the watcher's until it returns
		stopStream()
		<-watching
	}()

	recheck := time.NewTicker(b.cfg.RecheckInterval)
	defer recheck.Stop()

	var err error
loop:
	for {
		select {
		case <-recheck.C:
			if err = eng.recheck(engCtx); err != nil {
				err = engineErr(ctx, engCtx, err)
				break loop
			}
			eng.retryExhausted(engCtx)
		case ev := <-events:
			if err = eng.handle(engCtx, ev); err != nil {
				err = engineErr(ctx, engCtx, err)
				break loop
			}
		case p := <-eng.bf.pages:
			eng.register(p)
		case lane := <-eng.lanes.repaired:
			if err = eng.live.rebackfill(engCtx, eng, lane); err != nil {
				err = engineErr(ctx, engCtx, err)
				break loop
			}
		case err = <-streamErr:
			if !errors.Is(err, replication.ErrSlotInvalidated) { // says it all, with what to do
				err = fmt.Errorf("replication: %w", err)
			}
			break loop
		case err = <-eng.lanes.failed():
			err = fmt.Errorf("apply: %w", err)
			break loop
		case err = <-cpErr:
			err = fmt.Errorf("%w: %w", errCheckpoint, err)
			break loop
		case err = <-lost:
			// Another instance leads now: stop at once, without a drain;
			// it reads again what this one had not confirmed.
			break loop
		case <-ctx.Done():
			break loop
		}
	}
	graceful := ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled))
	if !graceful {
		if !errors.Is(err, ErrLeadershipLost) && !errors.Is(err, errCheckpoint) {
			// What the lanes made durable is where the next run starts.
			stopCheckpointer()
			<-cpErr
		}
		return err
	}
	// Graceful stop: the lanes write what they hold, the checkpoint is
	// stored and confirmed, then the stream closes.
	drained := make(chan struct{})
	go func() { eng.lanes.drain(); close(drained) }()
	timer := time.NewTimer(b.cfg.DrainTimeout)
	defer timer.Stop()
	select {
	case <-drained:
		select {
		case err = <-eng.lanes.failed():
			err = fmt.Errorf("apply: %w", err)
		default:
		}
	case <-timer.C:
		err = fmt.Errorf("graceful stop: calls still running after %s; unfinished transactions will be read again on restart", b.cfg.DrainTimeout)
	}
	stopCheckpointer()
	if cerr := <-cpErr; err == nil && cerr != nil {
		err = fmt.Errorf("checkpoint: %w", cerr)
	}
	stopStream()
	<-streamErr
	if err != nil {
		return err
	}
	s := b.Stats()
	confirmed, _, _ := eng.tracker.state()
	b.cfg.Logger.Info("stopped", "checkpoint", max(confirmed, checkpoint).String(), "changes", s.Changes, "calls", s.Calls, "cache_hits", s.CacheHits, "unchanged", s.Unchanged)
	return nil
}

// Stats returns the bridge's counters. It is safe to call while Run runs.
func (b *Bridge) Stats() Stats {
	if b.engine == nil {
		return Stats{}
	}
	_, peak := b.budget.inUse()
	s := Stats{Changes: b.engine.changes.Load(), Calls: b.engine.calls.Load(), CacheHits: b.engine.hits.Load(), PeakBytes: peak,
		Unchanged: b.engine.unchanged.Load()}
	for _, l := range b.lanes.all() {
		s.OpsWritten += l.stat.written.Load()
		s.Batches += l.stat.batches.Load()
		s.Errors += l.stat.errorsN.Load()
	}
	return s
}
