package engine

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgimageai/pgimageai/bridge/apply"
	"github.com/pgimageai/pgimageai/bridge/backfill"
	"github.com/pgimageai/pgimageai/bridge/calls"
	"github.com/pgimageai/pgimageai/bridge/cost"
	"github.com/pgimageai/pgimageai/bridge/park"
	"github.com/pgimageai/pgimageai/bridge/reconcile"
	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/bridge/switchover"
	"github.com/pgimageai/pgimageai/bridge/track"
	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/internal/reconn"
	"github.com/pgimageai/pgimageai/metrics"
	"github.com/pgimageai/pgimageai/provider/pace"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/state"
)

// Spawner starts the goroutines of a leadership (the bridge's supervisor):
// each is joined before the next leadership starts, and run's ctx ends when
// the leadership stops hard.
type Spawner interface {
	Go(name string, run func(ctx context.Context) error)
}

// Lanes is where items go (apply.Lanes).
type Lanes interface {
	Push(it work.Item)
	Retire(lane string)
	Rows() *apply.RowCounts
}

// Caller starts the calls of items (calls.Caller).
type Caller interface {
	Start(ctx context.Context, r *rules.Rule, look *cost.Lookup, img []byte, prompt string, fresh bool) (*work.Call, error)
	Replay(ctx context.Context, r *rules.Rule, look *cost.Lookup, img []byte, prompt string) (*work.Call, error)
	Answered(r *rules.Rule, img []byte, prompt string, a *state.BatchAnswer, look *cost.Lookup) *work.Call
}

// Tables are the OIDs of the bridge's own tables whose changes the engine
// reads from the WAL (state.TableOIDs).
type Tables struct {
	Rules, Models, Retries uint32
}

// config reports whether oid is pgimageai.rules or pgimageai.models.
func (t Tables) config(oid uint32) bool { return oid != 0 && (oid == t.Rules || oid == t.Models) }

// Resume is where the stream stands when the engine starts.
type Resume struct {
	Tracker *track.Tracker
	Own     *apply.Own                // the bridge's own write-back transactions
	Routed  map[string]state.Position // per lane: the lane's stored checkpoint
}

// DSNs are the databases' connection strings, for the connections of the
// workers the engine starts (backfills, reconciliations).
type DSNs struct {
	Source, Target string
}

// Deps is what an Engine is made of.
type Deps struct {
	Log     *slog.Logger
	TypeMap *pgtype.Map // the engine goroutine's own
	Live    *rules.Live
	Conns   *reconn.Pair // the engine goroutine's source and target connections
	Tables  Tables
	Calls   Caller
	Cost    calls.Cost // the byte budget and the daily caps the calls are under
	Metrics *metrics.Metrics
	Lanes   Lanes
	Resume  Resume
	DSN     DSNs
	Parked  *park.Drainer // whose markers place pages of parked rows; nil = none
}

// base is what every part of the engine reads; each part is driven by the
// engine's goroutine.
type base struct {
	log     *slog.Logger
	typeMap *pgtype.Map
	conns   *reconn.Pair
	rules   *ruleView
	out     *router // where items go (route.go)
	metrics *metrics.Metrics
	lanes   Lanes
	spawn   Spawner
	dsn     DSNs
}

// Engine reads events in commit order and hands each to the part that
// answers it: row changes to rows (what they mean, decide.go; who does it,
// calls.go; where it goes, route.go), configuration changes to cfg, and the
// markers it placed in the WAL to the handler that placed them (backfill
// pages, switches, new tables, retries and parked rows). It is driven by
// one goroutine (the bridge's pipeline); calls run on their own
// goroutines, lanes on theirs.
type Engine struct {
	b       *base
	rows    *rowWork   // row changes: decide, call, route (rows.go)
	res     *results   // the calls of items (calls.go)
	cfg     *configs   // configuration changes and rechecks (config.go)
	bf      *backfills // backfill workers and pages (backfills.go)
	sw      *switches  // version switches and drops (switch.go)
	wt      *watch     // partitions, new source tables (watch.go)
	re      *rereads   // retry requests and parked rows (retry.go, unpark.go)
	changes atomic.Int64
}

// New returns the Engine of d, with no rules until Load. The workers it
// starts (backfills, reconciliations, batch cleanups) go through spawn; the
// switch coordinator's watchers run under ctx.
func New(ctx context.Context, spawn Spawner, d Deps) *Engine {
	b := &base{log: d.Log, typeMap: d.TypeMap, conns: d.Conns, metrics: d.Metrics, lanes: d.Lanes, spawn: spawn, dsn: d.DSN,
		rules: &ruleView{live: d.Live, tables: d.Tables},
		out:   newRouter(d.Resume, d.Lanes, d.Cost.Budget)}
	res := &results{base: b, calls: d.Calls}
	cfg := &configs{base: b}
	bf := newBackfills(b, res, d.Cost)
	sw := &switches{base: b, cfg: cfg, co: switchover.NewCoordinator(spawn, d.Log, d.DSN.Source, d.DSN.Target), atSwitch: map[string]bool{}}
	wt := newWatch(b, cfg, bf)
	bf.sources = wt
	cfg.bf, cfg.sw = bf, sw
	e := &Engine{b: b, res: res, cfg: cfg, bf: bf, sw: sw, wt: wt,
		rows: &rowWork{base: b, res: res, notes: &bf.since, cfg: cfg},
		re:   &rereads{base: b, res: res, daily: d.Cost.Daily, parked: d.Parked}}
	b.rules.swap(rules.NewSet(nil))
	return e
}

// Changes returns how many row changes the engine read.
func (e *Engine) Changes() int64 { return e.changes.Load() }

// Handle applies one event.
func (e *Engine) Handle(ctx context.Context, ev replication.Event) error {
	out := e.b.out
	switch ev := ev.(type) {
	case replication.Begin:
		out.begin(e.b.log, ev)
	case *replication.Change:
		if out.open == nil {
			return fmt.Errorf("change at %s outside a transaction", ev.LSN)
		}
		out.open.event++
		e.changes.Add(1)
		e.b.metrics.Change(strings.ToLower(ev.Op.String()))
		return e.change(ctx, ev)
	case replication.Commit:
		if out.open == nil {
			return fmt.Errorf("commit at %s without begin", ev.CommitLSN)
		}
		t := out.open
		out.open = nil
		if len(t.config) > 0 {
			// The new configuration takes effect exactly here: after this
			// transaction, before the next.
			if err := e.cfg.commit(ctx, t); err != nil {
				return err
			}
		}
		out.tracker.Seal(t.rec, ev.EndLSN)
	case *replication.Message:
		if out.open == nil || !ev.Transactional {
			return nil
		}
		out.open.event++
		// Only a marker the engine (or the Drainer) placed itself does
		// anything; its ID is a secret nonce.
		switch ev.Prefix {
		case switchover.Prefix:
			return e.sw.marker(ctx, ev)
		case reconcile.Prefix:
			return e.wt.marker(ctx, ev)
		case park.Prefix:
			return e.re.unpark(ctx, ev)
		case backfill.Prefix:
			return e.bf.page(ctx, ev)
		}
	case replication.Reset:
		out.reset()
	}
	return nil
}

// change hands a row change to the part it is for: the configuration's,
// an operator's retry request, or the rules' of its table. The bridge's own
// write-back transactions are not read again.
func (e *Engine) change(ctx context.Context, ch *replication.Change) error {
	tables, open := e.b.rules.tables, e.b.out.open
	switch {
	case ch.Op == replication.Truncate:
		return e.rows.truncate(ctx, ch)
	case tables.config(ch.Relation.OID):
		open.config = append(open.config, rules.Change{Models: ch.Relation.OID == tables.Models, Ch: ch})
		return nil
	case ch.Relation.OID == tables.Retries && tables.Retries != 0:
		if ch.Op != replication.Insert {
			return nil
		}
		return e.re.request(ctx, ch)
	case open.own:
		return nil
	}
	return e.rows.change(ctx, ch)
}

// ruleView is the valid rules, swapped whole at each configuration change
// (see rules.Set): set for the engine's goroutine, current for the others;
// live, which makes new sets; and the tables whose changes are
// configuration changes.
type ruleView struct {
	set     *rules.Set
	current atomic.Pointer[rules.Set]
	models  atomic.Pointer[map[string]string] // current's models by rule, for other goroutines
	live    *rules.Live
	tables  Tables
}

// swap makes set the engine's rules, from the next change on.
func (v *ruleView) swap(set *rules.Set) {
	v.set = set
	v.current.Store(set)
	models := set.RuleModels() // a copy: the set's own maps are the engine goroutine's
	v.models.Store(&models)
}

// TargetRules returns the valid rules that write target table lane. It is
// safe for concurrent use.
func (e *Engine) TargetRules(lane string) []*rules.Rule {
	if s := e.b.rules.current.Load(); s != nil {
		return s.ForTarget(lane)
	}
	return nil
}

// Live reports whether r is one of the valid rules now, as compiled then
// (same name and fingerprint): calls queued for a rule deleted, disabled or
// changed since are not sent. It is safe for concurrent use.
func (e *Engine) Live(r work.Ruled) bool {
	s := e.b.rules.current.Load()
	if s == nil {
		return true
	}
	w := r.Ref()
	cur := s.Named(w.Name)
	return cur != nil && cur.Fingerprint == w.Fingerprint
}

// RuleModels returns the models.name each valid rule calls, by rule, as
// of the last configuration change. It is safe for concurrent use; the map
// is not to be changed.
func (e *Engine) RuleModels() map[string]string {
	if m := e.b.rules.models.Load(); m != nil {
		return *m
	}
	return nil
}

// Governors returns the governor of each model the valid rules call, by
// models.name. It is safe for concurrent use.
func (e *Engine) Governors() map[string]*pace.Governor {
	if s := e.b.rules.current.Load(); s != nil {
		return s.Governors()
	}
	return nil
}

// Pages receives the pages that backfill workers read; the engine's
// goroutine passes each to Register.
func (e *Engine) Pages() <-chan *backfill.Page { return e.bf.pages }

// Register keeps a page read by a worker until its marker message arrives
// (see backfills.register).
func (e *Engine) Register(p *backfill.Page) { e.bf.register(p) }

// StartDeferred starts the backfills deferred until the slot existed.
func (e *Engine) StartDeferred(ctx context.Context) error { return e.bf.startDeferred(ctx) }

// Switches returns the watchers' reports, for the pipeline to hand to
// Switchover on the engine's goroutine.
func (e *Engine) Switches() <-chan switchover.Report { return e.sw.co.Reports() }

// Switchover takes a watcher's report (see switches.report).
func (e *Engine) Switchover(rep switchover.Report) { e.sw.report(rep) }

// Watch checks the catalog for what pgoutput does not send (see watch). It
// runs on the engine's goroutine, between transactions.
func (e *Engine) Watch(ctx context.Context) error {
	if e.b.out.open != nil {
		return nil
	}
	return e.wt.check(ctx)
}

// StopWatch stops the reconciliations the engine started and waits for
// them: a leadership's workers end before the next one starts.
func (e *Engine) StopWatch() { e.wt.recs.stop() }

// RetryExhausted asks, once a new UTC day began, for a retry of the rows
// refused for a spent budget (see rereads.exhausted).
func (e *Engine) RetryExhausted(ctx context.Context) { e.re.exhausted(ctx) }
