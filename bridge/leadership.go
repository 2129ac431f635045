package bridge

import (
	"context"
	"fmt"
	"time"

	"github.com/pgimageai/pgimageai/bridge/apply"
	"github.com/pgimageai/pgimageai/bridge/calls"
	"github.com/pgimageai/pgimageai/bridge/cost"
	"github.com/pgimageai/pgimageai/bridge/engine"
	"github.com/pgimageai/pgimageai/bridge/park"
	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/bridge/track"
	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/internal/circuit"
	"github.com/pgimageai/pgimageai/internal/reconn"
	"github.com/pgimageai/pgimageai/internal/supervise"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

// prepared is what a leadership starts from, read before any of its
// goroutines runs: the checked source, the rules, where to resume and what
// earlier runs left (permanent failures, the day's spending).
type prepared struct {
	conns      *reconn.Pair // the engine goroutine's source and target connections
	cpw        *sink.Writer // the checkpointer's: stores the slot's checkpoint
	lookups    *cost.Lookups
	live       *rules.Live
	tables     engine.Tables
	resume     engine.Resume
	cache      *cost.Cache
	daily      *cost.Daily
	checkpoint replication.LSN // where the stream starts
}

// close closes what prepare opened.
func (p *prepared) close(ctx context.Context) {
	p.lookups.Close(ctx)
	p.cpw.Close(ctx)
	p.conns.Close(ctx)
}

// prepare checks the source, loads the rules and reads where the
// leadership resumes. On failure it has closed what it opened.
func (b *Bridge) prepare(ctx context.Context) (_ *prepared, err error) {
	cfg := b.cfg
	p := &prepared{conns: reconn.NewPair(cfg.SourceDSN, cfg.TargetDSN), cpw: sink.NewWriter(cfg.TargetDSN, cfg.Slot, ""),
		lookups: cost.NewLookups(cfg.TargetDSN, 4)}
	defer func() {
		if err != nil {
			p.close(context.WithoutCancel(ctx))
		}
	}()
	src, tgt, err := p.conns.Conns(ctx)
	if err != nil {
		return nil, err
	}
	if err := replication.Preflight(ctx, src); err != nil {
		return nil, err
	}
	if err := replication.CheckPrimary(ctx, src); err != nil {
		return nil, err
	}
	p.live = rules.NewLive(cfg.Logger, cfg.Publication, cfg.Registry, cfg.Env, p.conns)
	if cfg.Limits.ReadColumnsOnly {
		p.live.PublishReadColumns()
	}
	p.live.TrustTables(cfg.Trust.Tables)
	if err := p.live.Load(ctx, rules.GroupOrDefault(cfg.Group)); err != nil {
		return nil, fmt.Errorf("%w (run pgimageai migrate first)", err)
	}
	if p.tables.Rules, p.tables.Models, p.tables.Retries, err = state.TableOIDs(ctx, src); err != nil {
		return nil, fmt.Errorf("%w (run pgimageai migrate first)", err)
	}
	// The bridge's own write-back transactions that the slot may send again.
	xids, err := state.OwnXacts(ctx, tgt)
	if err != nil {
		return nil, err
	}
	next, err := state.NextXID(ctx, src)
	if err != nil {
		return nil, err
	}
	// The slot is confirmed only through the checkpointer, once stored:
	// the tracker's moves and the stream's idle positions alike.
	p.resume = engine.Resume{Tracker: track.New(nil), Own: apply.NewOwn(xids, next)}
	// Permanent failures of earlier runs are not paid for again.
	p.cache = cost.NewCache(max(cfg.Limits.CacheEntries, 0), cfg.Limits.CacheBytes)
	failed, err := state.PermanentFailures(ctx, tgt, max(cfg.Limits.CacheEntries, 0))
	if err != nil {
		return nil, err
	}
	for _, f := range failed {
		if len(f.InputKey) == len(work.Key{}) {
			p.cache.Fail(work.Key(f.InputKey), &functions.Error{Reason: functions.Reason(f.Reason), Detail: f.Detail, ImageBytes: -1,
				Err: provider.Errorf(provider.Permanent, "%s", f.Detail)})
		}
	}
	// Where to stream from — after starting over, when the slot skipped
	// changes since the checkpoint.
	if p.checkpoint, err = b.closeGap(ctx, src, tgt); err != nil {
		return nil, err
	}
	// Each lane resumes after its own checkpoint: what a lane wrote of a
	// transaction the slot has not confirmed is skipped, without a call.
	if p.resume.Routed, err = state.LoadLaneCheckpoints(ctx, tgt, cfg.Slot); err != nil {
		return nil, err
	}
	// The requests waiting in batches count against the day they went into
	// the batch, as they did before the restart.
	spent, day, err := state.CountedToday(ctx, tgt)
	if err != nil {
		return nil, err
	}
	p.daily = cost.NewDaily(cfg.Timing.Now, day, spent, cfg.Metrics)
	return p, nil
}

// start builds the leadership's stages on p and starts their goroutines
// under sup: the parked rows' drainer, the pace watch and retention; the
// lanes and calls start theirs through sup as work comes. The engine is
// made before anything asks it, so that no function captures it unset.
func (b *Bridge) start(ctx context.Context, sup *supervise.Supervisor, p *prepared) (_ *pipeline, err error) {
	cfg, log := b.cfg, b.cfg.Logger
	src, tgt, err := p.conns.Conns(ctx)
	if err != nil {
		return nil, err
	}
	tracker := p.resume.Tracker
	stream := replication.NewStream(replication.Config{
		ConnString: cfg.SourceDSN, Slot: cfg.Slot, Publication: cfg.Publication,
		StatusInterval: cfg.Timing.StatusInterval, FailoverWait: cfg.Timing.FailoverWait, Logger: log,
		Idle: func(lsn replication.LSN) { tracker.Idle(lsn) },
	})
	budget := cost.NewBudget(cfg.Limits.ByteBudget)
	// The models' circuits, and the rows parked while a model is down:
	// restored first, so that a model a previous run left down is probed
	// before any call, and lanes know which rules have parked rows.
	drainer := park.New(park.Config{Log: log, Slot: cfg.Slot, SourceDSN: cfg.SourceDSN, TargetDSN: cfg.TargetDSN,
		Circuit: circuit.Config{Threshold: cfg.Outage.Threshold, ProbeMin: cfg.Outage.ProbeMin, ProbeMax: cfg.Outage.ProbeMax}})
	if err := drainer.Load(ctx, tgt); err != nil {
		return nil, err
	}
	lanes := apply.New(sup, apply.Config{
		Parked: drainer.Rules(),
		Log:    log, Budget: budget, Tracker: tracker, Metrics: cfg.Metrics, MaxOps: cfg.Limits.BatchOps,
		Linger: apply.LingerFor, Backoff: 200 * time.Millisecond, Own: p.resume.Own.Add, Idle: apply.DefaultIdle,
		NewWriter: func(lane string) apply.Writer { return sink.NewWriter(cfg.TargetDSN, cfg.Slot, lane) },
	})
	caller := calls.New(sup, calls.Cost{Budget: budget, Cache: p.cache, Lookups: p.lookups, Daily: p.daily}, cfg.Metrics, lanes.Rows())
	caller.SetBreaker(drainer.Breaker())
	// The engine's backfills run under a context of the supervisor (ended
	// at its hard stop), which also gives the engine its spawner.
	eng := engine.New(sup.Context(), sup, engine.Deps{
		Log: log, TypeMap: tgt.TypeMap(), Live: p.live, Conns: p.conns, Tables: p.tables,
		Calls: caller, Cost: caller.Cost, Metrics: cfg.Metrics, Lanes: lanes, Resume: p.resume,
		DSN: engine.DSNs{Source: cfg.SourceDSN, Target: cfg.TargetDSN}, Parked: drainer,
	})
	defer func() {
		if err != nil {
			eng.StopWatch()
		}
	}()
	caller.SetLive(func(r *rules.Rule) bool { return eng.Live(r) })
	lanes.SetTargets(targets(eng, cfg.SourceDSN, cfg.TargetDSN))
	drainer.SetModels(eng.RuleModels)
	// The publication goes first: pgoutput refuses to decode from before
	// its publication existed. Backfills read rows only once the slot exists.
	if err := eng.Load(ctx); err != nil {
		return nil, err
	}
	if err := replication.EnsureSlot(ctx, src, cfg.Slot); err != nil {
		return nil, err
	}
	if err := eng.StartDeferred(ctx); err != nil {
		return nil, err
	}
	valid, invalid := p.live.Counts()
	// The one line that says what runs: which build, on which database and
	// slot, for which group and how many rules.
	log.Info("streaming", "version", cfg.Version, "database", src.Config().Database, "slot", cfg.Slot, "group", cfg.Group,
		"publication", cfg.Publication, "rules", valid, "invalid_rules", invalid, "checkpoint", p.checkpoint.String(), "lanes", len(p.resume.Routed))

	b.run.Store(&running{budget: budget, tracker: tracker, lanes: lanes, engine: eng, calls: caller.Counters(), breaker: drainer.Breaker(), parked: drainer.Rules()})
	b.setStream(stream)
	sup.Go("park drainer", func(ctx context.Context) error { drainer.Run(ctx); return nil })
	sup.Go("pace watch", paceWatch{log: log, dsn: cfg.TargetDSN, slot: cfg.Slot, every: cfg.Timing.PaceReport, governors: eng.Governors, lanes: lanes.Status}.run)
	sup.Go("retention", retention{log: log, sourceDSN: cfg.SourceDSN, targetDSN: cfg.TargetDSN, slot: cfg.Slot, metrics: cfg.Metrics,
		first: retentionFirst, every: retentionEvery}.run)
	return &pipeline{log: log, timing: cfg.Timing, eng: eng, lanes: lanes, tracker: tracker, lock: b.lock,
		stream: stream, checkpoint: p.checkpoint, cpw: p.cpw}, nil
}

// targets is what the lanes ask of eng's rules of their targets.
func targets(eng *engine.Engine, sourceDSN, targetDSN string) apply.Targets {
	return apply.Targets{
		Any:  func(lane string) bool { return len(eng.TargetRules(lane)) > 0 },
		Live: func(r *work.Rule) bool { return eng.Live(r) },
		Repair: func(ctx context.Context, lane string) error {
			rs := eng.TargetRules(lane)
			if len(rs) == 0 {
				return apply.ErrNoRules // deleted with its rules: nothing to make again
			}
			// The stream may not have reached the rules' deletion yet: a
			// table dropped after its rules were deleted is not made again.
			if alive, err := rulesAlive(ctx, sourceDSN, rs); err != nil {
				return err
			} else if !alive {
				return apply.ErrNoRules
			}
			return recreate(ctx, targetDSN, rs)
		},
	}
}
