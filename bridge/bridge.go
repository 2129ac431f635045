package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/sink"
)

// Defaults of Config.
const (
	DefaultByteBudget   = 256 << 20
	DefaultBatchOps     = 2000
	DefaultCacheEntries = 10000
	DefaultDrainTimeout = 2 * time.Minute
)

// Config configures a Bridge.
type Config struct {
	SourceDSN    string // where the rules, the slot and the source tables live
	TargetDSN    string // where results, errors and checkpoints go; "" = SourceDSN
	Slot         string
	Publication  string
	Registry     *provider.Registry
	Env          provider.Env
	ByteBudget   int64         // bytes of images in flight; default 256 MiB
	BatchOps     int           // target ops per transaction before a flush; default 2000
	CacheEntries int           // results remembered; default 10000; negative = off
	DrainTimeout time.Duration // how long a graceful stop waits for calls in flight
	Logger       *slog.Logger
	// StatusInterval is how often the stream reports its position; 0 = the
	// replication default.
	StatusInterval time.Duration
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
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
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
}

// Bridge streams changes of the source tables of the enabled rules through
// their functions into the target tables.
type Bridge struct {
	cfg    Config
	engine *engine
	apply  *applier
	budget *budget
}

// New returns a Bridge; Run starts it.
func New(cfg Config) *Bridge {
	return &Bridge{cfg: cfg.withDefaults()}
}

// Run checks the source, loads the rules, prepares the targets, the
// publication and the slot, and streams until ctx ends. A cancelled ctx is a
// graceful stop: transactions already read are finished, written and
// confirmed, and Run returns nil. Any other return is a failure.
func (b *Bridge) Run(ctx context.Context) error {
	cfg := b.cfg
	log := cfg.Logger
	src, err := pgx.Connect(ctx, cfg.SourceDSN)
	if err != nil {
		return fmt.Errorf("connect to source: %w", err)
	}
	defer src.Close(context.WithoutCancel(ctx))
	tgt, err := pgx.Connect(ctx, cfg.TargetDSN)
	if err != nil {
		return fmt.Errorf("connect to target: %w", err)
	}
	// The writer owns tgt from here on; it may replace it after a reconnect.
	w := sink.NewWriter(tgt, cfg.TargetDSN, cfg.Slot)
	defer w.Close(context.WithoutCancel(ctx))

	if err := replication.Preflight(ctx, src); err != nil {
		return err
	}
	rules, invalid, err := loadRules(ctx, src, tgt, cfg.Registry, cfg.Env)
	if err != nil {
		return err
	}
	for _, r := range invalid {
		log.Error("invalid rule skipped", "rule", r.Name, "source_table", r.SourceTable, "err", r.Err)
	}
	if err := sink.ReportInvalidRules(ctx, tgt, toInvalidRows(invalid)); err != nil {
		return err
	}
	eng := &engine{
		log: log, rules: map[uint32][]*Rule{}, config: map[uint32]bool{},
		typeMap: tgt.TypeMap(), budget: newBudget(cfg.ByteBudget), cache: newCache(max(cfg.CacheEntries, 0)),
		rels: map[*replication.Relation]*relation{},
	}
	tables := []pgx.Identifier{{"pgimageai", "rules"}, {"pgimageai", "models"}}
	seen := map[uint32]bool{}
	for _, r := range rules {
		eng.rules[r.Source.OID] = append(eng.rules[r.Source.OID], r)
		if !seen[r.Source.OID] {
			seen[r.Source.OID] = true
			tables = append(tables, r.Source.Identifier())
		}
		log.Info("rule loaded", "rule", r.Name, "function", string(r.Fn.Name()), "model", r.Model,
			"source", r.Source.String(), "target", r.Target.Name()+"."+r.Target.Column)
	}
	for _, name := range []string{"pgimageai.rules", "pgimageai.models"} {
		var oid uint32
		if err := src.QueryRow(ctx, "SELECT $1::regclass::oid", name).Scan(&oid); err != nil {
			return fmt.Errorf("%s: %w (run pgimageai migrate first)", name, err)
		}
		eng.config[oid] = true
	}
	if err := replication.SyncPublication(ctx, src, cfg.Publication, tables); err != nil {
		return err
	}
	if err := replication.EnsureSlot(ctx, src, cfg.Slot); err != nil {
		return err
	}
	checkpoint, err := sink.LoadCheckpoint(ctx, tgt, cfg.Slot)
	if err != nil {
		return err
	}
	log.Info("streaming", "slot", cfg.Slot, "publication", cfg.Publication, "rules", len(rules),
		"invalid_rules", len(invalid), "checkpoint", checkpoint.String())

	stream := replication.NewStream(replication.Config{
		ConnString: cfg.SourceDSN, Slot: cfg.Slot, Publication: cfg.Publication,
		StatusInterval: cfg.StatusInterval, Logger: log,
	})
	app := &applier{log: log, w: w, ack: stream.Ack, maxOps: cfg.BatchOps, backoff: 200 * time.Millisecond}
	b.engine, b.apply, b.budget = eng, app, eng.budget
	return b.pipeline(ctx, stream, checkpoint)
}

// pipeline runs stream → engine → applier until ctx ends or a stage fails.
func (b *Bridge) pipeline(ctx context.Context, stream *replication.Stream, checkpoint replication.LSN) error {
	// The stream and the calls outlive ctx so that a graceful stop can finish
	// what it read and confirm it; hard bounds them instead.
	hard, cancelHard := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHard()
	b.engine.callCtx = hard
	streamCtx, stopStream := context.WithCancel(hard)
	defer stopStream()

	events := make(chan replication.Event, 64)
	streamErr := make(chan error, 1)
	go func() { streamErr <- stream.Run(streamCtx, checkpoint, events) }()
	queue := make(chan *txn, 256)
	applyErr := make(chan error, 1)
	go func() { applyErr <- b.apply.run(hard, queue) }()

	var err error
loop:
	for {
		select {
		case ev := <-events:
			if err = b.engine.handle(ctx, ev, queue); err != nil {
				break loop
			}
		case err = <-streamErr:
			err = fmt.Errorf("replication: %w", err)
			break loop
		case err = <-applyErr:
			err = fmt.Errorf("apply: %w", err)
			break loop
		case <-ctx.Done():
			break loop
		}
	}
	graceful := ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled))
	if !graceful {
		return err
	}
	// Graceful stop: finish the committed transactions already queued, write
	// them, confirm them, then close the stream.
	close(queue)
	timer := time.NewTimer(b.cfg.DrainTimeout)
	defer timer.Stop()
	select {
	case err = <-applyErr:
	case <-timer.C:
		err = fmt.Errorf("graceful stop: calls still running after %s; unfinished transactions will be read again on restart", b.cfg.DrainTimeout)
	}
	stopStream()
	<-streamErr
	if err != nil {
		return err
	}
	s := b.Stats()
	b.cfg.Logger.Info("stopped", "checkpoint", b.apply.lastDone.String(), "changes", s.Changes, "calls", s.Calls, "cache_hits", s.CacheHits)
	return nil
}

// Stats returns the bridge's counters. It is safe to call while Run runs only
// for the atomic counters; the others are read after Run returned.
func (b *Bridge) Stats() Stats {
	if b.engine == nil {
		return Stats{}
	}
	_, peak := b.budget.inUse()
	return Stats{
		Changes: b.engine.changes.Load(), Calls: b.engine.calls.Load(), CacheHits: b.engine.hits.Load(),
		OpsWritten: b.apply.written, Batches: b.apply.batches, Errors: b.apply.errorsN, PeakBytes: peak,
	}
}

func toInvalidRows(invalid []InvalidRule) []sink.InvalidRule {
	out := make([]sink.InvalidRule, len(invalid))
	for i, r := range invalid {
		out[i] = sink.InvalidRule{Rule: r.Name, SourceTable: r.SourceTable, Detail: r.Err.Error()}
	}
	return out
}
