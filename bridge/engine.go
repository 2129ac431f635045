package bridge

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/metrics"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

// callOverhead is what the byte budget charges for a call on top of twice its
// image bytes (the image, and the request that carries it): the goroutine and
// the answer, so that tiny images cannot make the number of calls in flight
// unbounded. The image bytes are released when the call ends; the overhead
// when its result is written.
const callOverhead = 16 << 10

// itemOverhead is what the byte budget charges for an item waiting in a lane
// on top of its key: results and deletes of a lane behind a slow model stay
// bounded by the budget like the images are.
const itemOverhead = 1 << 10

// itemKind is what an item does to the target.
type itemKind uint8

const (
	itemResult   itemKind = iota + 1 // write a function result (or NULL) for a row
	itemMove                         // re-key a target row
	itemDelete                       // delete a target row
	itemTruncate                     // empty a target table
	itemBackfill                     // record a backfill page's progress
	itemResolve                      // resolve a row's open errors (its source row is gone)
)

// item is one effect of a source change on one target table (a lane), at a
// position of the stream.
type item struct {
	kind        itemKind
	rule        *Rule        // itemResult, itemBackfill, itemResolve
	target      *sink.Target // the lane's table
	rules       []string     // the rules of the lane, whose errors a delete resolves
	sourceTable string
	key         []any // the row's (new) key
	keyJSON     []byte
	oldKey      []any // itemMove
	oldKeyJSON  []byte
	lsn         replication.LSN
	call        *call                  // itemResult with a provider call; nil = a NULL image
	waits       []*call                // itemMove: the calls it must not be written before
	progress    state.BackfillProgress // itemBackfill

	pos  state.Position // where in the stream; a lane's checkpoint after writing it
	rec  *txnRecord     // its source transaction, for confirming the slot
	cost int64          // budget bytes held until the item is written
}

// ready reports whether the item's call (if any) has finished.
func (it *item) ready() bool { return it.notReady() == nil }

// notReady returns a call the item waits for, or nil when it is ready.
func (it *item) notReady() *call {
	if it.call != nil && !it.call.ready() {
		return it.call
	}
	for _, c := range it.waits {
		if !c.ready() {
			return c
		}
	}
	return nil
}

// placed is an item and its position, before it is emitted.
type placed struct {
	pos state.Position
	it  item
}

// call is one function call in flight; done is closed once result and err are
// set.
type call struct {
	done   chan struct{}
	result functions.Result
	err    error
	hit    bool      // served by the cache or an identical call in flight
	size   int       // image length, for errors rows found after the call
	head   []byte    // first bytes of the image
	held   int64     // budget bytes its item is charged, from emit until written
	key    *cacheKey // the call's identity; nil when no provider was asked
	// unchanged: the stored result was computed from the same input; no
	// call was made and nothing is written.
	unchanged bool
}

// failedCall is a call that failed before any provider was asked.
func failedCall(err error, size int, head []byte) *call {
	c := &call{done: make(chan struct{}), result: functions.Result{Null: true}, err: err, size: size, head: head}
	close(c.done)
	return c
}

func (c *call) ready() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// openTxn is the source transaction being read, or the transaction of a
// backfill page's or retry's marker message.
type openTxn struct {
	final      replication.LSN // Begin.FinalLSN: the commit LSN
	commitTime time.Time
	rec        *txnRecord
	event      int64          // ordinal of the current change or message in the transaction
	config     []configChange // changes of rules and models, applied at commit
	own        bool           // the bridge's own write-back transaction: ignored
}

// eventBits is how many bits of a position's ordinal number the items of one
// event (a change or message): up to 16M items, the rows of a backfill page
// or a retry included.
const eventBits = 24

// engine reads events in commit order, decides what each change means for
// each rule, starts the calls and routes the items to their lanes. It is
// driven by one goroutine (Bridge.Run); calls run on their own goroutines,
// lanes on theirs.
type engine struct {
	log *slog.Logger
	// rules is the valid rules, swapped whole at each configuration
	// change (see ruleSet); current is the same set for other goroutines.
	rules   *ruleSet
	current atomic.Pointer[ruleSet]
	config  map[uint32]bool // OIDs of pgimageai.rules and pgimageai.models
	models  uint32          // OID of pgimageai.models
	live    *liveConfig
	typeMap *pgtype.Map // the engine goroutine's own
	budget  *budget
	cache   *cache
	lanes   *lanes
	tracker *tracker
	own     *ownXacts       // IDs of the bridge's own write-back transactions
	retries uint32          // OID of pgimageai.retry_requests
	callCtx context.Context // calls outlive a graceful stop's cancellation
	open    *openTxn
	resumed *openTxn                  // the transaction cut off by a Reset, sent again next
	routed  map[string]state.Position // per lane: the last position routed (or stored at start)
	bf      backfillState             // the running backfills, coordinated on the engine's goroutine
	memo    promptMemo                // last prompt per rule and row, for prompt templates
	metrics *metrics.Metrics
	lookups *lookups // the stored inputs of results; nil = not compared
	workers workers  // run the calls, per model
	budgets *budgets // what each model spent today
	// retryBudgets is set when a UTC day began: the rows refused for a
	// spent budget are to be retried (see retryExhausted).
	retryBudgets bool
	unchanged    atomic.Int64
	calls        atomic.Int64
	hits         atomic.Int64
	changes      atomic.Int64
}

// handle applies one event.
func (e *engine) handle(ctx context.Context, ev replication.Event) error {
	switch ev := ev.(type) {
	case replication.Begin:
		if r := e.resumed; r != nil {
			e.resumed = nil
			if r.final == ev.FinalLSN {
				// The transaction cut off by the Reset, sent again: its
				// items routed before are skipped by position.
				e.open = &openTxn{final: r.final, commitTime: r.commitTime, rec: r.rec, own: r.own}
				return nil
			}
			e.log.Warn("the transaction cut off by a reconnect was not sent again", "commit_lsn", r.final.String(), "next", ev.FinalLSN.String())
			e.tracker.abandon(r.rec)
		}
		e.open = &openTxn{final: ev.FinalLSN, commitTime: ev.CommitTime, rec: e.tracker.begin(ev.CommitTime),
			own: e.own.take(ev.XID)}
	case *replication.Change:
		if e.open == nil {
			return fmt.Errorf("change at %s outside a transaction", ev.LSN)
		}
		e.open.event++
		e.changes.Add(1)
		e.metrics.Change(strings.ToLower(ev.Op.String()))
		return e.change(ctx, ev)
	case replication.Commit:
		if e.open == nil {
			return fmt.Errorf("commit at %s without begin", ev.CommitLSN)
		}
		t := e.open
		e.open = nil
		if len(t.config) > 0 {
			// The new configuration takes effect exactly here: after this
			// transaction, before the next.
			if err := e.live.commit(ctx, e, t); err != nil {
				return err
			}
		}
		e.tracker.seal(t.rec, ev.EndLSN)
	case *replication.Message:
		if e.open == nil || !ev.Transactional {
			return nil
		}
		e.open.event++
		if ev.Prefix == backfillPrefix {
			// Only a marker of a page the bridge read itself does
			// anything; its ID holds a secret nonce (see page).
			return e.page(ctx, ev)
		}
	case replication.Reset:
		// The server sends the open transaction again after the reconnect;
		// what was routed of it stays, and is skipped when read again.
		if e.open != nil {
			e.resumed, e.open = e.open, nil
		}
	}
	return nil
}

// swap makes set the engine's rules, from the next change on.
func (e *engine) swap(set *ruleSet) {
	e.rules = set
	e.current.Store(set)
}

// targetRules returns the valid rules that write target table lane. It is
// safe for concurrent use.
func (e *engine) targetRules(lane string) []*Rule {
	if s := e.current.Load(); s != nil {
		return s.byTarget[lane]
	}
	return nil
}

// position returns the position of item sub of the current event.
func (e *engine) position(sub int) state.Position {
	return state.Position{Commit: e.open.final, Ord: e.open.event<<eventBits | int64(sub)}
}

// admit reports whether the item sub of the current event for lane must be
// made: false when the lane has it already (stored before a restart, or
// routed before a reconnect). It is asked before any call is started, so
// that what was written costs no new call.
func (e *engine) admit(lane string, sub int) (state.Position, bool) {
	pos := e.position(sub)
	return pos, e.routed[lane].Less(pos)
}

// emit routes an item at pos to its lane. It charges the budget for the item
// while it waits there, which blocks the engine — and so the stream — when
// the lanes hold the whole budget.
func (e *engine) emit(ctx context.Context, pos state.Position, it item) error {
	lane := it.target.Name()
	it.pos, it.rec = pos, e.open.rec
	it.cost = itemOverhead + int64(len(it.keyJSON)+len(it.oldKeyJSON))
	if it.call != nil {
		it.cost += it.call.held
	}
	if err := e.budget.acquire(ctx, it.cost); err != nil {
		return err
	}
	e.routed[lane] = pos
	e.tracker.add(it.rec)
	e.lanes.rows.route(lane, &it)
	e.lanes.get(lane).push(it)
	return nil
}

func (e *engine) change(ctx context.Context, ch *replication.Change) error {
	if ch.Op == replication.Truncate {
		return e.truncate(ctx, ch)
	}
	if e.config[ch.Relation.OID] {
		e.open.config = append(e.open.config, configChange{models: ch.Relation.OID == e.models, ch: ch})
		return nil
	}
	if ch.Relation.OID == e.retries && e.retries != 0 {
		if ch.Op != replication.Insert {
			return nil
		}
		return e.retryRequest(ctx, ch)
	}
	rules := e.rules.bySource[ch.Relation.OID]
	if len(rules) == 0 || e.open.own {
		return nil
	}
	rel, rules, err := e.relation(ctx, ch.Relation)
	if err != nil || len(rules) == 0 {
		return err
	}
	src := rules[0].Source.String()
	sub := 0
	switch ch.Op {
	case replication.Delete:
		key, keyJSON, err := e.key(ch.Relation, ch.Old, rel, rules[0])
		if err != nil {
			return err
		}
		e.touch(ch.Relation.OID, keyJSON)
		for _, t := range targets(rules) {
			pos, ok := e.admit(t.Name(), sub)
			sub++
			if !ok {
				continue
			}
			it := item{kind: itemDelete, target: t, rules: rulesOf(rules, t), sourceTable: src, key: key, keyJSON: keyJSON, lsn: ch.LSN}
			if err := e.emit(ctx, pos, it); err != nil {
				return err
			}
		}
		return nil
	case replication.Insert, replication.Update:
		key, keyJSON, err := e.key(ch.Relation, ch.New, rel, rules[0])
		if err != nil {
			return err
		}
		e.touch(ch.Relation.OID, keyJSON)
		var emits []placed // in position order: moves first, then results
		// Where each lane's stored input is compared (see results.go): at
		// the row's key, or — for a key move, whose Move carries the result
		// and its input along — at its old key; while an earlier change of
		// the row waits in the lane, with that change's input instead.
		// An INSERT has nothing stored to compare with: a row's stored
		// input goes with its DELETE (and moves with its key), so the read
		// would only cost a round trip per new row.
		look := map[string]*lookup{}
		for _, r := range rules {
			if lane := r.Target.Name(); ch.Op == replication.Update {
				look[lane] = e.lanes.rows.at(lane, keyJSON, key)
			}
		}
		if ch.Op == replication.Update && ch.Old != nil && !sameKey(ch.Old, ch.New, rel.key) {
			oldKey, oldJSON, err := e.key(ch.Relation, ch.Old, rel, rules[0])
			if err != nil {
				return err
			}
			e.touch(ch.Relation.OID, oldJSON)
			for _, r := range rules {
				if lane := r.Target.Name(); !r.Target.WriteBack && look[lane] != nil && !look[lane].busy {
					look[lane] = e.lanes.rows.at(lane, oldJSON, oldKey)
				} else if !r.Target.WriteBack {
					look[lane] = nil
				}
			}
			for _, t := range targets(rules) {
				pos, ok := e.admit(t.Name(), sub)
				sub++
				if !ok {
					continue
				}
				emits = append(emits, placed{pos, item{kind: itemMove, target: t, rules: rulesOf(rules, t), sourceTable: src,
					key: key, keyJSON: keyJSON, oldKey: oldKey, oldKeyJSON: oldJSON, lsn: ch.LSN}})
			}
		}
		moves := len(emits)
		for _, r := range rules {
			pos, ok := e.admit(r.Target.Name(), sub)
			sub++
			if !ok {
				continue
			}
			it, ok, err := e.rowResult(ctx, ch, rel, r, key, keyJSON, look[r.Target.Name()])
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
				if p.it.call != nil && p.it.target.Name() == emits[i].it.target.Name() {
					emits[i].it.waits = append(emits[i].it.waits, p.it.call)
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
func (e *engine) rowResult(ctx context.Context, ch *replication.Change, rel *relation, r *Rule, key []any, keyJSON []byte, look *lookup) (item, bool, error) {
	idx := rel.image[r.ImageColumn]
	c := rowChange{op: ch.Op, image: ch.New[idx]}
	if ch.Old != nil {
		c.oldImage = &ch.Old[idx]
	}
	if r.Template != nil {
		var err error
		if c.values, c.unchanged, err = e.templateValues(ch.Relation, ch.New, r.Template); err != nil {
			return item{}, false, fmt.Errorf("rule %s at %s: %w", r.Name, ch.LSN, err)
		}
		c.lastPrompt = e.memo.last(r.Name, keyJSON)
	}
	d, err := decide(r, c)
	if err == nil && d.act == actFetch {
		// Unchanged TOAST is not empty: read the values from the row.
		var f map[string]any
		if f, err = e.fetch(ctx, r, keyJSON, d.fetch); err != nil {
			return item{}, false, err
		}
		if f == nil {
			return item{}, false, nil // deleted since; its DELETE follows
		}
		c.fetched = &fetchedRow{values: map[string]string{}}
		for _, name := range c.unchanged {
			col, _ := r.Source.Column(name)
			if c.fetched.values[name], err = textOf(e.typeMap, col.TypeOID, f[name]); err != nil {
				return item{}, false, err
			}
		}
		if img, ok := f[r.ImageColumn].([]byte); ok {
			c.fetched.image = img
		} else {
			c.fetched.imageNull = true
		}
		d, err = decide(r, c)
	}
	if err != nil {
		return item{}, false, fmt.Errorf("%s.%s at %s: %w", r.Source, r.ImageColumn, ch.LSN, err)
	}
	if d.remember {
		e.memo.set(r.Name, keyJSON, d.prompt)
	}
	it := item{kind: itemResult, rule: r, target: r.Target, sourceTable: r.Source.String(), key: key, keyJSON: keyJSON, lsn: ch.LSN}
	switch d.act {
	case actNull:
		// NULL image: NULL result, no call.
	case actCall:
		if it.call, err = e.start(ctx, r, look, d.image, d.prompt, false); err != nil {
			return item{}, false, err
		}
	default:
		return item{}, false, nil
	}
	return it, true, nil
}

func (e *engine) truncate(ctx context.Context, ch *replication.Change) error {
	sub := 0
	for _, r := range ch.Truncated {
		if e.config[r.OID] {
			e.open.config = append(e.open.config, configChange{models: r.OID == e.models, ch: &replication.Change{Op: replication.Truncate}})
			continue
		}
		rules := e.rules.bySource[r.OID]
		if e.bf.seen[r.OID] != nil {
			e.bf.truncated[r.OID] = true // pages read before it must not bring rows back
		}
		for _, t := range targets(rules) {
			pos, ok := e.admit(t.Name(), sub)
			sub++
			if !ok {
				continue
			}
			it := item{kind: itemTruncate, target: t, rules: rulesOf(rules, t), sourceTable: rules[0].Source.String(), lsn: ch.LSN}
			if err := e.emit(ctx, pos, it); err != nil {
				return err
			}
		}
	}
	return nil
}

// start begins one function call. Images that need no provider (empty,
// unknown, too large, unsupported) finish at once without budget; the others
// wait for budget — which stops the engine reading, the backpressure of
// SPEC §5 — and then run on their model's workers.
//
// fresh asks the provider even when the cache remembers a permanent failure
// of the same call (pgimageai retry).
//
// look, when set, is where the stored input is compared first (see
// results.go): a match makes no call; at a busy row, an earlier change of
// the same input still waiting makes none either: c follows its call.
func (e *engine) start(ctx context.Context, r *Rule, look *lookup, img []byte, prompt string, fresh bool) (*call, error) {
	c := &call{done: make(chan struct{}), size: len(img), head: magic.Head(img, 16)}
	if _, err := r.Fn.Check(img); err != nil {
		c.result, c.err = functions.Result{Null: true}, err
		close(c.done)
		return c, nil
	}
	// The image is charged twice: its bytes, and the request that carries
	// it (base64, JSON) while the call runs; and what the provider holds in
	// this process to answer (the local provider decodes the image).
	imgCost := 2*int64(len(img)) + r.Fn.CallMemory(img)
	// The call's overhead is charged when its item is emitted (held): a
	// change whose rules start several big calls must not wait, holding
	// overhead of its own, for budget that only its own items would free.
	if err := e.budget.acquire(ctx, imgCost); err != nil {
		return nil, err
	}
	c.held = callOverhead
	k := keyOf(r.Fn.Name(), r.ModelKey, prompt, img)
	c.key = &k
	if fresh {
		e.cache.forget(k)
	}
	compare := !fresh && e.lookups != nil && look != nil && !look.busy
	var prev *call // at a busy row, the earlier change's call of the same input
	if !fresh && look != nil && look.busy {
		prev = e.lanes.rows.pending(look, r.Name, k)
	}
	e.workers.submit(r.ModelKey, r.Fn.Parallelism(), func() {
		defer e.budget.release(imgCost)
		// prev was queued first on this model's workers: it runs or is done.
		if prev != nil && c.follow(prev) {
			e.hits.Add(1)
			e.metrics.CacheHit(r.Name)
			close(c.done)
			return
		}
		if compare && e.lookups.same(e.callCtx, r, look, k[:]) {
			c.unchanged, c.hit = true, true
			e.unchanged.Add(1)
			close(c.done)
			return
		}
		c.result, c.hit, c.err = e.cache.do(e.callCtx, k, func() (functions.Result, error) {
			if err := e.budgets.reserve(r.Model, r.Budget); err != nil {
				return functions.Result{Null: true}, err // not cached: not permanent
			}
			e.calls.Add(1)
			res, err := e.call(r, img, prompt)
			e.budgets.settle(r.Model, r.Budget, err == nil, int64(res.Usage.PromptTokens+res.Usage.CompletionTokens))
			return res, err
		})
		if c.hit {
			e.hits.Add(1)
			e.metrics.CacheHit(r.Name)
		}
		close(c.done)
	})
	return c, nil
}

// call calls r's function at the provider, observing it for metrics.
func (e *engine) call(r *Rule, img []byte, prompt string) (functions.Result, error) {
	ctx := e.callCtx
	if m := e.metrics; m != nil {
		ctx = provider.WithTrace(ctx, &provider.Trace{Retry: func(int, error, time.Duration) { m.Retry(r.Model) }})
	}
	t0 := time.Now()
	res, err := r.Fn.CallPrompt(ctx, img, true, prompt)
	outcome := "ok"
	switch {
	case err != nil && e.callCtx.Err() != nil:
		outcome = "canceled"
	case err != nil:
		outcome = string(functions.ProviderError)
		if reason := functions.ReasonOf(err); reason != "" {
			outcome = string(reason)
		}
	}
	e.metrics.Call(r.Name, r.Model, outcome, time.Since(t0))
	return res, err
}

// relation returns the column positions of r, computed once per Relation,
// and the rules of its table. A rule that the table no longer fits (its image
// column renamed, dropped or no longer bytea, or the primary key changed)
// becomes invalid_rule here, at this WAL position, while the other rules go
// on (see liveConfig.misfit).
func (e *engine) relation(ctx context.Context, r *replication.Relation) (*relation, []*Rule, error) {
	for {
		rules := e.rules.bySource[r.OID]
		if rel, ok := e.rules.rels[r]; ok || len(rules) == 0 {
			return rel, rules, nil
		}
		rel, misfits := fit(r, rules)
		if len(misfits) == 0 {
			e.rules.rels[r] = rel
			return rel, rules, nil
		}
		if err := e.live.misfit(ctx, e, misfits); err != nil {
			return nil, nil, err
		}
	}
}

// key decodes the primary key of a tuple into Go values and source_key JSON.
func (e *engine) key(r *replication.Relation, t replication.Tuple, rel *relation, rule *Rule) ([]any, []byte, error) {
	if t == nil {
		return nil, nil, fmt.Errorf("table %s.%s: change without the key tuple (check REPLICA IDENTITY)", r.Namespace, r.Name)
	}
	vals := make([]any, len(rel.key))
	for i, idx := range rel.key {
		v, err := replication.DecodeValue(e.typeMap, r.Columns[idx], t[idx])
		if err != nil {
			return nil, nil, fmt.Errorf("table %s.%s key column %s: %w", r.Namespace, r.Name, r.Columns[idx].Name, err)
		}
		vals[i] = v
	}
	js, err := sink.KeyJSON(e.typeMap, rule.KeyColumns, vals)
	if err != nil {
		return nil, nil, err
	}
	return vals, js, nil
}

// keyDigest identifies a source row by a digest of its source_key JSON.
type keyDigest [16]byte

func digestKey(keyJSON []byte) keyDigest {
	var d keyDigest
	sum := sha256.Sum256(keyJSON)
	copy(d[:], sum[:])
	return d
}

// touch records that the stream changed the row keyed keyJSON of table oid,
// while a backfill of that table runs: the backfill then leaves the row to
// the stream, whose version is at least as new as any page's.
func (e *engine) touch(oid uint32, keyJSON []byte) {
	if seen := e.bf.seen[oid]; seen != nil {
		seen[digestKey(keyJSON)] = true
	}
}

// rulesOf returns the names of the rules of target t.
func rulesOf(rules []*Rule, t *sink.Target) []string {
	var out []string
	for _, r := range rules {
		if r.Target.Name() == t.Name() {
			out = append(out, r.Name)
		}
	}
	return out
}

// targets returns the distinct target tables of rules, in rule order, that
// follow the source's deletes, key moves and truncates: not the write-back
// ones, whose rows are the source's own.
func targets(rules []*Rule) []*sink.Target {
	var out []*sink.Target
	seen := map[string]bool{}
	for _, r := range rules {
		if !r.Target.WriteBack && !seen[r.Target.Name()] {
			seen[r.Target.Name()] = true
			out = append(out, r.Target)
		}
	}
	return out
}

func sameKey(a, b replication.Tuple, idx []int) bool {
	for _, i := range idx {
		if a[i].Kind != b[i].Kind || !bytes.Equal(a[i].Data, b[i].Data) {
			return false
		}
	}
	return true
}
