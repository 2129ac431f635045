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
	shapes map[uint32]catalog.Shape // each source table's, as last seen
	// picked holds the queued ranges started, so that a range whose
	// bookkeeping the lane has not written yet is not started twice.
	picked map[string]state.Backfill
	// accepted: the source OID each rule's results are known to be of.
	accepted map[string]uint32
	pending  map[string]string // new-table markers placed, by nonce: the target table
	marking  map[string]bool   // target tables with a marker on its way

	ctx    context.Context // the workers'; ends with the leadership (StopWatch)
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex                   // guards below, written by the workers
	runs   map[string]bool              // reconciliations running, by rule
	again  map[string]reconcile.Options // to run once the running one ended (or failed)
	scopes map[string][]pgx.Identifier
	failed map[string]int // failures in a row, by rule
}

// reconcileTries is how often a reconciliation is tried, one check apart,
// before the bridge gives up on it and says to run pgimageai reconcile (a
// partition attached and dropped again before it was read, a source that
// keeps failing).
const reconcileTries = 3

func newWatch(ctx context.Context) watch {
	ctx, cancel := context.WithCancel(ctx)
	return watch{shapes: map[uint32]catalog.Shape{}, picked: map[string]state.Backfill{}, accepted: map[string]uint32{},
		pending: map[string]string{}, marking: map[string]bool{}, ctx: ctx, cancel: cancel,
		runs: map[string]bool{}, again: map[string]reconcile.Options{}, scopes: map[string][]pgx.Identifier{}, failed: map[string]int{}}
}

// StopWatch stops the reconciliations the engine started and waits for
// them: a leadership's workers end before the next one starts.
func (e *Engine) StopWatch() {
	e.wt.cancel()
	e.wt.wg.Wait()
}

// Watch checks the catalog for what pgoutput does not send (see watch).
// A failure is logged and the check repeated next time; it never stops the
// bridge. It runs on the engine's goroutine, between transactions.
func (e *Engine) Watch(ctx context.Context) error {
	if e.pos.open != nil {
		return nil
	}
	src, tgt, err := e.conns.Conns(ctx)
	if err != nil {
		e.log.Warn("checking the source tables' partitions failed; retrying at the next check", "err", err)
		return nil
	}
	seen := map[uint32]bool{}
	var names []string
	for _, r := range e.rules.set.All() {
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
			e.log.Warn("checking the source tables' partitions failed; retrying at the next check", "err", err)
			return nil
		}
		if now.OID != r.Source.OID {
			// Dropped, renamed, or dropped and created again: the rules
			// load again (invalid, or on the new table).
			e.log.Warn("a source table is no longer the table its rules were loaded for; loading them again", "source", r.Source.String(), "oid", r.Source.OID, "now", now.OID)
			return e.reconfigure(ctx, "following the source table "+r.Source.String(), nil)
		}
		before, known := e.wt.shapes[r.Source.OID]
		e.wt.shapes[r.Source.OID] = now
		if !known {
			continue // the first look: what changed before the bridge ran is reconcile's
		}
		if c := before.Diff(now); !c.Empty() {
			e.partitionsChanged(r.Source, c)
		}
	}
	for oid := range e.wt.shapes {
		if !seen[oid] {
			delete(e.wt.shapes, oid)
		}
	}
	e.startAgain()
	return e.startQueued(ctx, tgt, names)
}

// partitionsChanged reconciles the rules of source after its partitions
// changed by c.
func (e *Engine) partitionsChanged(source *catalog.Table, c catalog.ShapeChange) {
	e.log.Info("partitions of a source table changed; reconciling its rules", "source", source.String(),
		"attached", len(c.Attached), "detached_or_dropped", len(c.Gone), "truncated_or_rewritten", len(c.Rewritten))
	o := reconcile.Options{Orphans: len(c.Gone)+len(c.Rewritten) > 0, Missing: len(c.Attached) > 0}
	var scopes []pgx.Identifier
	for _, l := range c.Attached {
		scopes = append(scopes, l.Ident)
	}
	for _, r := range e.rules.set.ForSource(source.OID) {
		e.reconcileRule(r, o, scopes)
	}
}

// reconcileRule runs a reconciliation of r on a goroutine of its own, or —
// while one runs — once it ended.
func (e *Engine) reconcileRule(r *rules.Rule, o reconcile.Options, scopes []pgx.Identifier) {
	e.wt.mu.Lock()
	defer e.wt.mu.Unlock()
	if prev, ok := e.wt.again[r.Name]; ok || e.wt.runs[r.Name] {
		o.Orphans, o.Missing = o.Orphans || prev.Orphans, o.Missing || prev.Missing
		scopes = append(e.wt.scopes[r.Name], scopes...)
	}
	o.Scopes = len(scopes)
	if e.wt.runs[r.Name] {
		e.wt.again[r.Name], e.wt.scopes[r.Name] = o, scopes
		return
	}
	delete(e.wt.again, r.Name)
	delete(e.wt.scopes, r.Name)
	e.wt.runs[r.Name] = true
	rc := reconcile.Of(r, e.rules.set.ForTarget(r.Target.Name()))
	e.wt.wg.Go(func() {
		err := e.runReconcile(rc, o, scopes)
		e.wt.mu.Lock()
		defer e.wt.mu.Unlock()
		delete(e.wt.runs, rc.Name)
		if err == nil || e.wt.ctx.Err() != nil {
			delete(e.wt.failed, rc.Name)
			return
		}
		if e.wt.failed[rc.Name]++; e.wt.failed[rc.Name] >= reconcileTries {
			delete(e.wt.failed, rc.Name)
			e.log.Error("reconciliation failed; giving up: run pgimageai reconcile --rule RULE", "rule", rc.Name, "tries", reconcileTries, "err", err)
			return
		}
		e.log.Warn("reconciliation failed; trying again at the next check", "rule", rc.Name, "err", err)
		prev := e.wt.again[rc.Name]
		o.Orphans, o.Missing = o.Orphans || prev.Orphans, o.Missing || prev.Missing
		e.wt.scopes[rc.Name] = append(scopes, e.wt.scopes[rc.Name]...)
		o.Scopes = len(e.wt.scopes[rc.Name])
		e.wt.again[rc.Name] = o
	})
}

// startAgain starts the reconciliations that waited for a running one, or
// failed.
func (e *Engine) startAgain() {
	e.wt.mu.Lock()
	var names []string
	for name := range e.wt.again {
		if !e.wt.runs[name] {
			names = append(names, name)
		}
	}
	e.wt.mu.Unlock()
	for _, name := range names {
		e.wt.mu.Lock()
		o, scopes := e.wt.again[name], e.wt.scopes[name]
		delete(e.wt.again, name)
		delete(e.wt.scopes, name)
		e.wt.mu.Unlock()
		if r := e.rules.set.Named(name); r != nil {
			e.reconcileRule(r, o, scopes)
		}
	}
}

// runReconcile reconciles rc on connections of its own.
func (e *Engine) runReconcile(rc reconcile.Rule, o reconcile.Options, scopes []pgx.Identifier) error {
	ctx := e.wt.ctx
	conns := reconn.NewPair(e.bf.srcDSN, e.bf.tgtDSN)
	defer conns.Close(context.WithoutCancel(ctx))
	src, tgt, err := conns.Conns(ctx)
	if err != nil {
		return err
	}
	rep, err := reconcile.Run(ctx, reconcile.NewDB(src, tgt, rc, scopes), o)
	if err != nil {
		return err
	}
	e.log.Info("reconciled", "rule", rc.Name, "target_rows", rep.TargetRows, "source_rows", rep.SourceRows,
		"orphans", rep.Orphans, "removed", rep.Removed, "missing", rep.Missing, "queued", rep.Queued)
	return nil
}

// startQueued starts the backfills that reconciliation queued for the
// rules names.
func (e *Engine) startQueued(ctx context.Context, tgt *pgx.Conn, names []string) error {
	if len(names) == 0 {
		return nil
	}
	queued, err := state.QueuedBackfills(ctx, tgt, names)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		e.log.Warn("reading the queued backfills failed; retrying at the next check", "err", err)
		return nil
	}
	for name, b := range queued {
		r := e.rules.set.Named(name)
		if r == nil || b.Fingerprint != r.Fingerprint {
			continue
		}
		if _, running := e.bf.workers[name]; running {
			continue
		}
		if p, ok := e.wt.picked[name]; ok && string(p.LastKey) == string(b.LastKey) && string(p.StopKey) == string(b.StopKey) {
			continue // started; its lane has not written its first page yet
		}
		e.wt.picked[name] = b
		e.log.Info("backfill queued by reconcile starts", "rule", name)
		if err := e.startBackfill(ctx, r); err != nil {
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
func (e *Engine) newSource(ctx context.Context, r *rules.Rule) (bool, error) {
	src, tgt, err := e.conns.Conns(ctx)
	if err != nil {
		return false, err
	}
	if _, known := e.wt.shapes[r.Source.OID]; !known {
		now, err := catalog.ShapeOf(ctx, src, r.Source.OID, r.Source.String())
		if err != nil {
			return false, err
		}
		if now.OID == r.Source.OID {
			e.wt.shapes[r.Source.OID] = now
		}
	}
	if e.wt.accepted[r.Name] == r.Source.OID {
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
		e.wt.accepted[r.Name] = r.Source.OID
		return false, nil
	}
	lane := r.Target.Name()
	if e.wt.marking[lane] {
		return true, nil
	}
	nonce := newNonce()
	content, _ := json.Marshal(map[string]string{"reconcile": nonce})
	if _, err := src.Exec(ctx, "SELECT pg_logical_emit_message(true, $1, $2::text)", reconcile.Prefix, string(content)); err != nil {
		return false, fmt.Errorf("place the marker of a new source table: %w", err)
	}
	e.wt.pending[nonce], e.wt.marking[lane] = lane, true
	e.log.Warn("the source table of a rule is a new table (its OID changed): the old table's results go, then it is backfilled",
		"rule", r.Name, "source", r.Source.String(), "was", stored, "now", r.Source.OID, "target", lane)
	return true, nil
}

// newTableMarker applies a marker placed by newSource, inside its
// transaction: the target of the rules of a new source table is emptied
// (with their errors and stored inputs), their source recorded in the same
// target transaction, and their backfills started from the first row.
func (e *Engine) newTableMarker(ctx context.Context, m *replication.Message) error {
	var mk struct{ Reconcile string }
	if json.Unmarshal(m.Content, &mk) != nil {
		return nil
	}
	lane, ok := e.wt.pending[mk.Reconcile]
	if !ok {
		return nil // not placed by this leadership: does nothing
	}
	delete(e.wt.pending, mk.Reconcile)
	delete(e.wt.marking, lane)
	rs := e.rules.set.ForTarget(lane)
	if len(rs) == 0 {
		return nil
	}
	names := rulesOf(rs, rs[0].Target)
	if pos, ok := e.admit(lane, 0); ok {
		it := work.Item{Kind: work.Truncate, Dest: work.Dest{Target: rs[0].Target, Rules: names, SourceTable: rs[0].Source.String()}, LSN: m.LSN,
			// The old table's backfill state goes in the lane's order too: its
			// progress routed before the marker must not land on the new one's.
			Ops: []sink.Op{state.RuleSources{Rules: names, OID: rs[0].Source.OID}, state.DeleteBackfills{Rules: names}}}
		if err := e.emit(ctx, pos, it); err != nil {
			return err
		}
	}
	for _, r := range rs {
		e.stopBackfill(r.Name)
		e.wt.accepted[r.Name] = r.Source.OID
	}
	err := e.conns.Retrying(ctx, e.log, "forgetting the backfills of a new source table", func(_, tgt *pgx.Conn) error {
		return state.ForgetBackfills(ctx, tgt, names...)
	})
	if err != nil {
		return err
	}
	for _, r := range rs {
		if err := e.startBackfill(ctx, r); err != nil {
			return err
		}
	}
	return nil
}
