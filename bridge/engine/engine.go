package engine

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

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

// itemOverhead is what the byte budget charges for an item waiting in a lane
// on top of its key: results and deletes of a lane behind a slow model stay
// bounded by the budget like the images are.
const itemOverhead = 1 << 10

// placed is an item and its position, before it is emitted.
type placed struct {
	pos state.Position
	it  work.Item
}

// openTxn is the source transaction being read, or the transaction of a
// backfill page's or retry's marker message.
type openTxn struct {
	final      replication.LSN // Begin.FinalLSN: the commit LSN
	commitTime time.Time
	rec        *track.Txn
	event      int64          // ordinal of the current change or message in the transaction
	config     []rules.Change // changes of rules and models, applied at commit
	own        bool           // the bridge's own write-back transaction: ignored
}

// eventBits is how many bits of a position's ordinal number the items of one
// event (a change or message): up to 16M items, the rows of a backfill page
// or a retry included.
const eventBits = 24

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

// Deps is what an Engine is made of.
type Deps struct {
	Log       *slog.Logger
	TypeMap   *pgtype.Map // the engine goroutine's own
	Live      *rules.Live
	Conns     *reconn.Pair // the engine goroutine's source and target connections
	Tables    Tables
	Calls     *calls.Caller
	Metrics   *metrics.Metrics
	Lanes     *apply.Lanes
	Resume    Resume
	SourceDSN string // for the backfill workers' connections
	TargetDSN string
	Parked    *park.Drainer // whose markers place pages of parked rows; nil = none
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
	// retyped is the last relation whose key types made the rules compile
	// again (see relation): once per relation, however the catalog stands.
	retyped *replication.Relation
	// recheck: every rule is to be compiled again at the next Recheck,
	// not only the invalid ones (see RecheckNow); forced is when RecheckNow
	// last did.
	recheck bool
	forced  time.Time
}

// stream is where the engine stands in the stream: the transaction being
// read, the one a reconnect cut off, what each lane was routed, and the
// records that confirm the slot.
type stream struct {
	open    *openTxn
	resumed *openTxn                  // the transaction cut off by a Reset, sent again next
	routed  map[string]state.Position // per lane: the last position routed (or stored at start)
	tracker *track.Tracker
	own     *apply.Own // IDs of the bridge's own write-back transactions
}

// Engine reads events in commit order, decides what each change means for
// each rule, starts the calls and routes the items to their lanes. It is
// driven by one goroutine (the bridge's pipeline); calls run on their own
// goroutines, lanes on theirs.
type Engine struct {
	log     *slog.Logger
	typeMap *pgtype.Map
	rules   ruleView
	conns   *reconn.Pair
	pos     stream
	calls   *calls.Caller
	metrics *metrics.Metrics
	lanes   *apply.Lanes
	bf      backfills  // the running backfills, coordinated on the engine's goroutine
	sw      switches   // the version switches: watchers and markers
	wt      watch      // what pgoutput does not send: partitions, new source tables (watch.go)
	memo    promptMemo // last prompt per rule and row, for prompt templates
	parked  *park.Drainer
	changes atomic.Int64 // row changes read
	// retryBudgets is set when a UTC day began: the rows refused for a
	// spent budget are to be retried (see RetryExhausted).
	retryBudgets bool
}

// New returns the Engine of d, with no rules until Load. Backfill workers
// run under ctx, which outlives a graceful stop's cancellation.
func New(ctx context.Context, d Deps) *Engine {
	e := &Engine{log: d.Log, typeMap: d.TypeMap, conns: d.Conns, lanes: d.Lanes, calls: d.Calls, metrics: d.Metrics, parked: d.Parked,
		pos: stream{routed: d.Resume.Routed, tracker: d.Resume.Tracker, own: d.Resume.Own},
		bf:  newBackfills(d.SourceDSN, d.TargetDSN, ctx),
		sw:  switches{co: switchover.NewCoordinator(ctx, d.Log, d.SourceDSN, d.TargetDSN), switched: map[string]bool{}},
		wt:  newWatch(ctx)}
	e.bf.cleaner = backfill.NewCleaner(d.Log, d.TargetDSN)
	if e.pos.routed == nil {
		e.pos.routed = map[string]state.Position{}
	}
	e.rules.live, e.rules.tables = d.Live, d.Tables
	e.swap(rules.NewSet(nil))
	return e
}

// Changes returns how many row changes the engine read.
func (e *Engine) Changes() int64 { return e.changes.Load() }

// Handle applies one event.
func (e *Engine) Handle(ctx context.Context, ev replication.Event) error {
	switch ev := ev.(type) {
	case replication.Begin:
		if r := e.pos.resumed; r != nil {
			e.pos.resumed = nil
			if r.final == ev.FinalLSN {
				// The transaction cut off by the Reset, sent again: its
				// items routed before are skipped by position.
				e.pos.open = &openTxn{final: r.final, commitTime: r.commitTime, rec: r.rec, own: r.own}
				return nil
			}
			e.log.Warn("the transaction cut off by a reconnect was not sent again", "commit_lsn", r.final.String(), "next", ev.FinalLSN.String())
			e.pos.tracker.Abandon(r.rec)
		}
		e.pos.open = &openTxn{final: ev.FinalLSN, commitTime: ev.CommitTime, rec: e.pos.tracker.Begin(ev.CommitTime),
			own: e.pos.own.Take(ev.XID)}
	case *replication.Change:
		if e.pos.open == nil {
			return fmt.Errorf("change at %s outside a transaction", ev.LSN)
		}
		e.pos.open.event++
		e.changes.Add(1)
		e.metrics.Change(strings.ToLower(ev.Op.String()))
		return e.change(ctx, ev)
	case replication.Commit:
		if e.pos.open == nil {
			return fmt.Errorf("commit at %s without begin", ev.CommitLSN)
		}
		t := e.pos.open
		e.pos.open = nil
		if len(t.config) > 0 {
			// The new configuration takes effect exactly here: after this
			// transaction, before the next.
			if err := e.commit(ctx, t); err != nil {
				return err
			}
		}
		e.pos.tracker.Seal(t.rec, ev.EndLSN)
	case *replication.Message:
		if e.pos.open == nil || !ev.Transactional {
			return nil
		}
		e.pos.open.event++
		if ev.Prefix == switchover.Prefix {
			// Only a marker the engine placed itself does anything; its
			// ID is a secret nonce (see switchover.NewNonce).
			return e.switchMarker(ctx, ev)
		}
		if ev.Prefix == reconcile.Prefix {
			// Only a marker the engine placed itself does anything.
			return e.newTableMarker(ctx, ev)
		}
		if ev.Prefix == park.Prefix {
			// Only a marker the Drainer placed itself does anything; its
			// ID is a secret nonce.
			return e.unpark(ctx, ev)
		}
		if ev.Prefix == backfill.Prefix {
			// Only a marker of a page the bridge read itself does
			// anything; its ID holds a secret nonce (see page).
			return e.page(ctx, ev)
		}
	case replication.Reset:
		// The server sends the open transaction again after the reconnect;
		// what was routed of it stays, and is skipped when read again.
		if e.pos.open != nil {
			e.pos.resumed, e.pos.open = e.pos.open, nil
		}
	}
	return nil
}

// swap makes set the engine's rules, from the next change on.
func (e *Engine) swap(set *rules.Set) {
	e.rules.set = set
	e.rules.current.Store(set)
	models := set.RuleModels() // a copy: the set's own maps are the engine goroutine's
	e.rules.models.Store(&models)
}

// TargetRules returns the valid rules that write target table lane. It is
// safe for concurrent use.
func (e *Engine) TargetRules(lane string) []*rules.Rule {
	if s := e.rules.current.Load(); s != nil {
		return s.ForTarget(lane)
	}
	return nil
}

// Live reports whether r is one of the valid rules now, as compiled then
// (same name and fingerprint): calls queued for a rule deleted, disabled or
// changed since are not sent. It is safe for concurrent use.
func (e *Engine) Live(r work.Ruled) bool {
	s := e.rules.current.Load()
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
	if m := e.rules.models.Load(); m != nil {
		return *m
	}
	return nil
}

// Governors returns the governor of each model the valid rules call, by
// models.name. It is safe for concurrent use.
func (e *Engine) Governors() map[string]*pace.Governor {
	if s := e.rules.current.Load(); s != nil {
		return s.Governors()
	}
	return nil
}

// position returns the position of item sub of the current event.
func (e *Engine) position(sub int) state.Position {
	return state.Position{Commit: e.pos.open.final, Ord: e.pos.open.event<<eventBits | int64(sub)}
}

// admit reports whether the item sub of the current event for lane must be
// made: false when the lane has it already (stored before a restart, or
// routed before a reconnect). It is asked before any call is started, so
// that what was written costs no new call.
func (e *Engine) admit(lane string, sub int) (state.Position, bool) {
	pos := e.position(sub)
	return pos, e.pos.routed[lane].Less(pos)
}

// emit routes an item at pos to its lane. It charges the budget for the item
// while it waits there, which blocks the engine — and so the stream — when
// the lanes hold the whole budget.
func (e *Engine) emit(ctx context.Context, pos state.Position, it work.Item) error {
	lane := it.Dest.Target.Name()
	it.Pos, it.Txn = pos, e.pos.open.rec
	it.Cost = itemOverhead + int64(len(it.Row.JSON)+len(it.Old.JSON))
	if it.Call != nil {
		it.Cost += it.Call.Held
	}
	if err := e.calls.Budget.Acquire(ctx, it.Cost); err != nil {
		return err
	}
	e.pos.routed[lane] = pos
	e.pos.tracker.Add(it.Txn)
	e.lanes.Push(it)
	return nil
}

func (e *Engine) change(ctx context.Context, ch *replication.Change) error {
	if ch.Op == replication.Truncate {
		return e.truncate(ctx, ch)
	}
	if e.rules.tables.config(ch.Relation.OID) {
		e.pos.open.config = append(e.pos.open.config, rules.Change{Models: ch.Relation.OID == e.rules.tables.Models, Ch: ch})
		return nil
	}
	if ch.Relation.OID == e.rules.tables.Retries && e.rules.tables.Retries != 0 {
		if ch.Op != replication.Insert {
			return nil
		}
		return e.retryRequest(ctx, ch)
	}
	if len(e.rules.set.ForSource(ch.Relation.OID)) == 0 || e.pos.open.own {
		return nil
	}
	rel, rs, err := e.relation(ctx, ch.Relation)
	if err != nil || len(rs) == 0 {
		return err
	}
	src := rs[0].Source.String()
	sub := 0
	switch ch.Op {
	case replication.Delete:
		row, err := e.key(ch.Relation, ch.Old, rel, rs[0])
		if err != nil {
			return err
		}
		e.bf.since.touch(ch.Relation.OID, row.JSON)
		for _, t := range targets(rs) {
			pos, ok := e.admit(t.Name(), sub)
			sub++
			if !ok {
				continue
			}
			it := work.Item{Kind: work.Delete, Dest: work.Dest{Target: t, Rules: rulesOf(rs, t), SourceTable: src}, Row: row, LSN: ch.LSN}
			if err := e.emit(ctx, pos, it); err != nil {
				return err
			}
		}
		// After the other targets' items, so that their ordinals stay.
		for _, t := range writeBacks(rs) {
			pos, ok := e.admit(t.Name(), sub)
			sub++
			if !ok {
				continue
			}
			it := work.Item{Kind: work.Forget, Dest: work.Dest{Target: t, Rules: rulesOf(rs, t), SourceTable: src}, Row: row, LSN: ch.LSN}
			if err := e.emit(ctx, pos, it); err != nil {
				return err
			}
		}
		return nil
	case replication.Insert, replication.Update:
		row, err := e.key(ch.Relation, ch.New, rel, rs[0])
		if err != nil {
			return err
		}
		e.bf.since.touch(ch.Relation.OID, row.JSON)
		var emits []placed // in position order: moves first, then results
		// Where each lane's stored input is compared (cost.Lookups): at
		// the row's key, or — for a key move, whose Move carries the result
		// and its input along — at its old key; while an earlier change of
		// the row waits in the lane, with that change's input instead.
		// An INSERT has nothing stored to compare with: a row's stored
		// input goes with its DELETE (and moves with its key), so the read
		// would only cost a round trip per new row.
		look := map[string]*cost.Lookup{}
		rows := e.lanes.Rows()
		for _, r := range rs {
			if lane := r.Target.Name(); ch.Op == replication.Update {
				look[lane] = rows.At(lane, row.JSON, row.Key)
			}
		}
		if ch.Op == replication.Update && ch.Old != nil && !sameKey(ch.Old, ch.New, rel.Key) {
			old, err := e.key(ch.Relation, ch.Old, rel, rs[0])
			if err != nil {
				return err
			}
			e.bf.since.touch(ch.Relation.OID, old.JSON)
			for _, r := range rs {
				if lane := r.Target.Name(); !r.Target.WriteBack && look[lane] != nil && !look[lane].Busy {
					look[lane] = rows.At(lane, old.JSON, old.Key)
				} else if !r.Target.WriteBack {
					look[lane] = nil
				}
			}
			for _, t := range targets(rs) {
				pos, ok := e.admit(t.Name(), sub)
				sub++
				if !ok {
					continue
				}
				emits = append(emits, placed{pos, work.Item{Kind: work.Move, Dest: work.Dest{Target: t, Rules: rulesOf(rs, t), SourceTable: src},
					Row: row, Old: old, LSN: ch.LSN}})
			}
		}
		moves := len(emits)
		for _, r := range rs {
			pos, ok := e.admit(r.Target.Name(), sub)
			sub++
			if !ok {
				continue
			}
			it, ok, err := e.rowResult(ctx, ch, rel, r, row, look[r.Target.Name()])
			if err != nil {
				return err
			}
			if ok {
				emits = append(emits, placed{pos, it})
			}
		}
		// A Move waits for the calls of its row's results in its lane:
		// their stored inputs are compared at the old key, which the Move
		// changes once written.
		for i := range emits[:moves] {
			for _, p := range emits[moves:] {
				if p.it.Call != nil && p.it.Dest.Target.Name() == emits[i].it.Dest.Target.Name() {
					emits[i].it.Waits = append(emits[i].it.Waits, p.it.Call)
				}
			}
		}
		for _, p := range emits {
			if err := e.emit(ctx, p.pos, p.it); err != nil {
				return err
			}
		}
	}
	return nil
}

// rowResult does what an INSERT or UPDATE means for rule r (see decide): a
// call, a NULL result, or nothing (ok false) when neither the image nor a
// column its prompt names changed. It reads what decide asks for from the
// source row, and starts the call.
func (e *Engine) rowResult(ctx context.Context, ch *replication.Change, rel *rules.Relation, r *rules.Rule, row work.Row, look *cost.Lookup) (work.Item, bool, error) {
	idx := rel.Image[r.ImageColumn]
	c := rowChange{op: ch.Op, image: ch.New[idx]}
	if ch.Old != nil {
		c.oldImage = &ch.Old[idx]
	}
	if r.Template != nil {
		var err error
		if c.values, c.unchanged, err = e.templateValues(ch.Relation, ch.New, r.Template, r.Fn.MaxPromptBytes()); err != nil {
			return work.Item{}, false, fmt.Errorf("rule %s at %s: %w", r.Name, ch.LSN, err)
		}
		c.lastPrompt = e.memo.last(r.Name, row.JSON)
	}
	d, err := decide(r, c)
	if err == nil && d.act == actFetch {
		// Unchanged TOAST is not empty: read the values from the row.
		var f *fetched
		if f, err = e.fetch(ctx, r, row.JSON, d.fetch); err != nil {
			return work.Item{}, false, err
		}
		if f == nil {
			return work.Item{}, false, nil // deleted since; its DELETE follows
		}
		c.fetched = &fetchedRow{values: map[string]string{}}
		for _, name := range c.unchanged {
			col, _ := r.Source.Column(name)
			if c.fetched.values[name], err = rules.TextOf(e.typeMap, col.TypeOID, f.values[name]); err != nil {
				return work.Item{}, false, err
			}
		}
		switch img, ok := f.values[r.ImageColumn].([]byte); {
		case f.over:
			c.fetched.over = &oversized{size: f.size, head: f.head}
		case ok:
			c.fetched.image = img
		default:
			c.fetched.imageNull = true
		}
		d, err = decide(r, c)
	}
	if err != nil {
		return work.Item{}, false, fmt.Errorf("%s.%s at %s: %w", r.Source, r.ImageColumn, ch.LSN, err)
	}
	if d.remember {
		e.memo.set(r.Name, row.JSON, d.prompt)
	}
	it := work.Item{Kind: work.Result, Rule: r.Ref(), Dest: work.Dest{Target: r.Target, SourceTable: r.Source.String()}, Row: row, LSN: ch.LSN}
	switch d.act {
	case actNull:
		// NULL image: NULL result, no call.
	case actCall:
		if it.Call, err = e.calls.Start(ctx, r, look, d.image, d.prompt, false); err != nil {
			return work.Item{}, false, err
		}
	case actTooLarge:
		// Not read: a too_large errors row, with the length and head.
		it.Call = work.Failed(r.Fn.TooLarge(d.over.size, d.over.head), d.over.size, d.over.head)
	default:
		return work.Item{}, false, nil
	}
	return it, true, nil
}

func (e *Engine) truncate(ctx context.Context, ch *replication.Change) error {
	sub := 0
	for _, r := range ch.Truncated {
		if e.rules.tables.config(r.OID) {
			e.pos.open.config = append(e.pos.open.config, rules.Change{Models: r.OID == e.rules.tables.Models, Ch: &replication.Change{Op: replication.Truncate}})
			continue
		}
		rs := e.rules.set.ForSource(r.OID)
		e.bf.since.truncate(r.OID) // pages read before it must not bring rows back
		for _, t := range targets(rs) {
			pos, ok := e.admit(t.Name(), sub)
			sub++
			if !ok {
				continue
			}
			it := work.Item{Kind: work.Truncate, Dest: work.Dest{Target: t, Rules: rulesOf(rs, t), SourceTable: rs[0].Source.String()}, LSN: ch.LSN}
			if err := e.emit(ctx, pos, it); err != nil {
				return err
			}
		}
		for _, t := range writeBacks(rs) {
			pos, ok := e.admit(t.Name(), sub)
			sub++
			if !ok {
				continue
			}
			it := work.Item{Kind: work.Forget, Dest: work.Dest{Target: t, Rules: rulesOf(rs, t), SourceTable: rs[0].Source.String()}, LSN: ch.LSN}
			if err := e.emit(ctx, pos, it); err != nil {
				return err
			}
		}
	}
	return nil
}

// relation returns the column positions of r, computed once per Relation,
// and the rules of its table. A rule that the table no longer fits (its image
// column renamed, dropped or no longer bytea, or the primary key changed)
// becomes invalid_rule here, at this WAL position, while the other rules go
// on (see rules.Live.Misfit). A key whose type changed makes the rules
// compile again here, before the first change of the new shape is routed:
// their targets follow a widening (sink.Ensure) and their statements and
// keys take the new type.
func (e *Engine) relation(ctx context.Context, r *replication.Relation) (*rules.Relation, []*rules.Rule, error) {
	for {
		rs := e.rules.set.ForSource(r.OID)
		if rel, ok := e.rules.set.Relation(r); ok || len(rs) == 0 {
			return rel, rs, nil
		}
		rel, misfits := rules.Fit(r, rs)
		if len(misfits) == 0 && rel.Retyped && e.rules.retyped != r {
			e.rules.retyped = r
			// Fresh sessions: a statement the engine's sessions prepared
			// for the old key types (a backfill's last-row query) would
			// fail with "cached plan must not change result type".
			e.conns.Close(ctx)
			if err := e.reconfigure(ctx, fmt.Sprintf("following the key type change of %s", r.Identifier().Sanitize()), nil); err != nil {
				return nil, nil, err
			}
			continue
		}
		if len(misfits) == 0 {
			e.rules.set.Remember(r, rel)
			return rel, rs, nil
		}
		if err := e.misfit(ctx, misfits); err != nil {
			return nil, nil, err
		}
	}
}
