package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge/reconcile"
	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/internal/reconn"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

// newNonce returns a secret marker ID: any role may emit a logical
// decoding message with the marker's prefix, but none can name a marker
// the engine placed.
func newNonce() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// What pgoutput never sends, the engine watches in the catalog at each
// check (Watch, every Timing.RecheckInterval, between transactions):
//
//   - the leaf partitions of each partitioned source table, by OID and
//     relfilenode (catalog.ShapeOf): a partition attached has its rows
//     looked for and the rows without a result backfilled; a partition
//     detached, dropped or truncated (a new relfilenode) has the results of
//     rows no longer in the table removed — a reconciliation
//     (bridge/reconcile) on goroutines joined to the leadership;
//   - the OID each source table's name resolves to: a table dropped (or
//     renamed) makes its rules load again, and a table created again under
//     its name is a new table (newSource): its target is emptied of the old
//     table's results, at a marker in the WAL, before it is backfilled;
//   - the backfills that `pgimageai reconcile` queued, which start here.
type watch struct {
	*base
	cfg    reloader
	bf     watchedBackfills
	shapes map[uint32]catalog.Shape // each source table's, as last seen
	// picked holds the queued ranges started, so that a range whose
	// bookkeeping the lane has not written yet is not started twice.
	picked map[string]state.Backfill
	// accepted: the source OID each rule's results are known to be of.
	accepted map[string]uint32
	pending  map[string]string // new-table markers placed, by nonce: the target table
	marking  map[string]bool   // target tables with a marker on its way
	recs     *reconciles
}

// reconciles are the reconciliations running on goroutines of their own
// (through the Spawner), ended by stop.
type reconciles struct {
	wg      sync.WaitGroup
	mu      sync.Mutex                    // guards below, written by the workers
	stopped bool                          // stop was called: nothing starts
	cancels map[string]context.CancelFunc // the running ones', by rule
	runs    map[string]bool               // reconciliations running, by rule
	again   map[string]reconcile.Options  // to run once the running one ended (or failed)
	scopes  map[string][]pgx.Identifier
	failed  map[string]int // failures in a row, by rule
}

// watchedBackfills is what the watch asks of the backfills (backfills.go).
type watchedBackfills interface {
	start(ctx context.Context, r *rules.Rule) error
	stop(name string)
	running(name string) bool
}

// reconcileTries is how often a reconciliation is tried, one check apart,
// before the bridge gives up on it and says to run pgimageai reconcile (a
// partition attached and dropped again before it was read, a source that
// keeps failing).
const reconcileTries = 3

func newWatch(b *base, cfg reloader, bf watchedBackfills) *watch {
	return &watch{base: b, cfg: cfg, bf: bf, shapes: map[uint32]catalog.Shape{}, picked: map[string]state.Backfill{}, accepted: map[string]uint32{},
		pending: map[string]string{}, marking: map[string]bool{},
		recs: &reconciles{cancels: map[string]context.CancelFunc{}, runs: map[string]bool{}, again: map[string]reconcile.Options{},
			scopes: map[string][]pgx.Identifier{}, failed: map[string]int{}}}
}

// stop stops the reconciliations and waits for them: a leadership's
// workers end before the next one starts.
func (rc *reconciles) stop() {
	rc.mu.Lock()
	rc.stopped = true
	for _, cancel := range rc.cancels {
		cancel()
	}
	rc.mu.Unlock()
	rc.wg.Wait()
}

// check checks the catalog for what pgoutput does not send (see watch).
// A failure is logged and the check repeated next time; it never stops the
// bridge.
func (w *watch) check(ctx context.Context) error {
	src, tgt, err := w.conns.Conns(ctx)
	if err != nil {
		w.log.Warn("checking the source tables' partitions failed; retrying at the next check", "err", err)
		return nil
	}
	seen := map[uint32]bool{}
	var names []string
	for _, r := range w.rules.set.All() {
		names = append(names, r.Name)
		if seen[r.Source.OID] {
			continue
		}
		seen[r.Source.OID] = true
		now, err := catalog.ShapeOf(ctx, src, r.Source.OID, r.Source.String())
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			w.log.Warn("checking the source tables' partitions failed; retrying at the next check", "err", err)
			return nil
		}
		if now.OID != r.Source.OID {
			// Dropped, renamed, or dropped and created again: the rules
			// load again (invalid, or on the new table).
			w.log.Warn("a source table is no longer the table its rules were loaded for; loading them again", "source", r.Source.String(), "oid", r.Source.OID, "now", now.OID)
			return w.cfg.reconfigure(ctx, "following the source table "+r.Source.String(), nil)
		}
		before, known := w.shapes[r.Source.OID]
		w.shapes[r.Source.OID] = now
		if !known {
			continue // the first look: what changed before the bridge ran is reconcile's
		}
		if c := before.Diff(now); !c.Empty() {
			w.partitionsChanged(r.Source, c)
		}
	}
	for oid := range w.shapes {
		if !seen[oid] {
			delete(w.shapes, oid)
		}
	}
	w.startAgain()
	return w.startQueued(ctx, tgt, names)
}

// partitionsChanged reconciles the rules of source after its partitions
// changed by c.
func (w *watch) partitionsChanged(source *catalog.Table, c catalog.ShapeChange) {
	w.log.Info("partitions of a source table changed; reconciling its rules", "source", source.String(),
		"attached", len(c.Attached), "detached_or_dropped", len(c.Gone), "truncated_or_rewritten", len(c.Rewritten))
	o := reconcile.Options{Orphans: len(c.Gone)+len(c.Rewritten) > 0, Missing: len(c.Attached) > 0}
	var scopes []pgx.Identifier
	for _, l := range c.Attached {
		scopes = append(scopes, l.Ident)
	}
	for _, r := range w.rules.set.ForSource(source.OID) {
		w.reconcileRule(r, o, scopes)
	}
}

// reconcileRule runs a reconciliation of r on a goroutine of its own, or —
// while one runs — once it ended.
func (w *watch) reconcileRule(r *rules.Rule, o reconcile.Options, scopes []pgx.Identifier) {
	recs := w.recs
	recs.mu.Lock()
	defer recs.mu.Unlock()
	if prev, ok := recs.again[r.Name]; ok || recs.runs[r.Name] {
		o.Orphans, o.Missing = o.Orphans || prev.Orphans, o.Missing || prev.Missing
		scopes = append(recs.scopes[r.Name], scopes...)
	}
	o.Scopes = len(scopes)
	if recs.runs[r.Name] {
		recs.again[r.Name], recs.scopes[r.Name] = o, scopes
		return
	}
	if recs.stopped {
		return
	}
	delete(recs.again, r.Name)
	delete(recs.scopes, r.Name)
	recs.runs[r.Name] = true
	rc := reconcile.Of(r, w.rules.set.ForTarget(r.Target.Name()))
	recs.wg.Add(1)
	w.spawn.Go("reconciliation of "+rc.Name, func(ctx context.Context) error {
		defer recs.wg.Done()
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		recs.mu.Lock()
		if recs.stopped {
			delete(recs.runs, rc.Name)
			recs.mu.Unlock()
			return nil
		}
		recs.cancels[rc.Name] = cancel
		recs.mu.Unlock()
		err := w.runReconcile(ctx, rc, o, scopes)
		recs.mu.Lock()
		defer recs.mu.Unlock()
		delete(recs.runs, rc.Name)
		delete(recs.cancels, rc.Name)
		if err == nil || ctx.Err() != nil {
			delete(recs.failed, rc.Name)
			return nil
		}
		if recs.failed[rc.Name]++; recs.failed[rc.Name] >= reconcileTries {
			delete(recs.failed, rc.Name)
			w.log.Error("reconciliation failed; giving up: run pgimageai reconcile --rule RULE", "rule", rc.Name, "tries", reconcileTries, "err", err)
			return nil
		}
		w.log.Warn("reconciliation failed; trying again at the next check", "rule", rc.Name, "err", err)
		prev := recs.again[rc.Name]
		o.Orphans, o.Missing = o.Orphans || prev.Orphans, o.Missing || prev.Missing
		recs.scopes[rc.Name] = append(scopes, recs.scopes[rc.Name]...)
		o.Scopes = len(recs.scopes[rc.Name])
		recs.again[rc.Name] = o
		return nil
	})
}

// startAgain starts the reconciliations that waited for a running one, or
// failed.
func (w *watch) startAgain() {
	w.recs.mu.Lock()
	var names []string
	for name := range w.recs.again {
		if !w.recs.runs[name] {
			names = append(names, name)
		}
	}
	w.recs.mu.Unlock()
	for _, name := range names {
		w.recs.mu.Lock()
		o, scopes := w.recs.again[name], w.recs.scopes[name]
		delete(w.recs.again, name)
		delete(w.recs.scopes, name)
		w.recs.mu.Unlock()
		if r := w.rules.set.Named(name); r != nil {
			w.reconcileRule(r, o, scopes)
		}
	}
}

// runReconcile reconciles rc on connections of its own.
func (w *watch) runReconcile(ctx context.Context, rc reconcile.Rule, o reconcile.Options, scopes []pgx.Identifier) error {
	conns := reconn.NewPair(w.dsn.Source, w.dsn.Target)
	defer conns.Close(context.WithoutCancel(ctx))
	src, tgt, err := conns.Conns(ctx)
	if err != nil {
		return err
	}
	rep, err := reconcile.Run(ctx, reconcile.NewDB(src, tgt, rc, scopes), o)
	if err != nil {
		return err
	}
	w.log.Info("reconciled", "rule", rc.Name, "target_rows", rep.TargetRows, "source_rows", rep.SourceRows,
		"orphans", rep.Orphans, "removed", rep.Removed, "missing", rep.Missing, "queued", rep.Queued)
	return nil
}

// startQueued starts the backfills that reconciliation queued for the
// rules names.
func (w *watch) startQueued(ctx context.Context, tgt *pgx.Conn, names []string) error {
	if len(names) == 0 {
		return nil
	}
	queued, err := state.QueuedBackfills(ctx, tgt, names)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		w.log.Warn("reading the queued backfills failed; retrying at the next check", "err", err)
		return nil
	}
	for name, b := range queued {
		r := w.rules.set.Named(name)
		if r == nil || b.Fingerprint != r.Fingerprint {
			continue
		}
		if w.bf.running(name) {
			continue
		}
		if p, ok := w.picked[name]; ok && string(p.LastKey) == string(b.LastKey) && string(p.StopKey) == string(b.StopKey) {
			continue // started; its lane has not written its first page yet
		}
		w.picked[name] = b
		w.log.Info("backfill queued by reconcile starts", "rule", name)
		if err := w.bf.start(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// newSource reports whether r's backfill must wait because its source is
// a new table (another OID than its results were computed from): a marker
// is placed, at which the old table's results go and the backfill starts
// (newTableMarker).
//
// It also takes the first look at the source's partitions (see Watch),
// before the backfill reads any row: a partition attached after it is
// reconciled.
func (w *watch) newSource(ctx context.Context, r *rules.Rule) (bool, error) {
	src, tgt, err := w.conns.Conns(ctx)
	if err != nil {
		return false, err
	}
	if _, known := w.shapes[r.Source.OID]; !known {
		now, err := catalog.ShapeOf(ctx, src, r.Source.OID, r.Source.String())
		if err != nil {
			return false, err
		}
		if now.OID == r.Source.OID {
			w.shapes[r.Source.OID] = now
		}
	}
	if w.accepted[r.Name] == r.Source.OID {
		return false, nil
	}
	stored, found, err := state.RuleSource(ctx, tgt, r.Name)
	if err != nil {
		return false, err
	}
	if !found || stored == r.Source.OID || r.Target.WriteBack {
		if !found || stored != r.Source.OID {
			if err := state.RecordRuleSource(ctx, tgt, r.Name, r.Source.OID); err != nil {
				return false, err
			}
		}
		w.accepted[r.Name] = r.Source.OID
		return false, nil
	}
	lane := r.Target.Name()
	if w.marking[lane] {
		return true, nil
	}
	nonce := newNonce()
	content, _ := json.Marshal(map[string]string{"reconcile": nonce})
	if _, err := src.Exec(ctx, "SELECT pg_logical_emit_message(true, $1, $2::text)", reconcile.Prefix, string(content)); err != nil {
		return false, fmt.Errorf("place the marker of a new source table: %w", err)
	}
	w.pending[nonce], w.marking[lane] = lane, true
	w.log.Warn("the source table of a rule is a new table (its OID changed): the old table's results go, then it is backfilled",
		"rule", r.Name, "source", r.Source.String(), "was", stored, "now", r.Source.OID, "target", lane)
	return true, nil
}

// newTableMarker applies a marker placed by newSource, inside its
// transaction: the target of the rules of a new source table is emptied
// (with their errors and stored inputs), their source recorded in the same
// target transaction, and their backfills started from the first row.
func (w *watch) marker(ctx context.Context, m *replication.Message) error {
	var mk struct{ Reconcile string }
	if json.Unmarshal(m.Content, &mk) != nil {
		return nil
	}
	lane, ok := w.pending[mk.Reconcile]
	if !ok {
		return nil // not placed by this leadership: does nothing
	}
	delete(w.pending, mk.Reconcile)
	delete(w.marking, lane)
	rs := w.rules.set.ForTarget(lane)
	if len(rs) == 0 {
		return nil
	}
	names := rulesOf(rs, rs[0].Target)
	{
		it := work.Item{Kind: work.Truncate, Dest: work.Dest{Target: rs[0].Target, Rules: names, SourceTable: rs[0].Source.String()}, LSN: m.LSN,
			// The old table's backfill state goes in the lane's order too: its
			// progress routed before the marker must not land on the new one's.
			Ops: []sink.Op{state.RuleSources{Rules: names, OID: rs[0].Source.OID}, state.DeleteBackfills{Rules: names}}}
		if err := w.out.place(ctx, 0, it); err != nil {
			return err
		}
	}
	for _, r := range rs {
		w.bf.stop(r.Name)
		w.accepted[r.Name] = r.Source.OID
	}
	err := w.conns.Retrying(ctx, w.log, "forgetting the backfills of a new source table", func(_, tgt *pgx.Conn) error {
		return state.ForgetBackfills(ctx, tgt, names...)
	})
	if err != nil {
		return err
	}
	for _, r := range rs {
		if err := w.bf.start(ctx, r); err != nil {
			return err
		}
	}
	return nil
}
