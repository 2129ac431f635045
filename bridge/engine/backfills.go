package engine

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/pgimageai/pgimageai/bridge/backfill"
	"github.com/pgimageai/pgimageai/bridge/calls"
	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/state"
	"github.com/pgimageai/pgimageai/value"
)

// backfills is the engine's record of the running backfills. It is used by
// the engine's goroutine only; workers reach it through pages.
// progress is what the log says of a running backfill: the rows read, and
// when it last said so.
type progress struct {
	rows   int
	logged time.Time
}

// progressEvery is how often a running backfill's progress is logged: by
// time, not by pages, so that small pages do not flood the log.
const progressEvery = 30 * time.Second

type backfills struct {
	*base
	res     *results
	cost    calls.Cost                    // the caps and budget of Batch API backfills
	sources sourceChecker                 // whether a rule's source is a new table (watch.go)
	workers map[string]context.CancelFunc // stops each running backfill worker, by rule
	pages   chan *backfill.Page           // pages read by workers, for the engine's goroutine
	pending map[string]*backfill.Page     // pages waiting for their marker message
	rows    map[string]*progress          // rows read by each running backfill, for the log
	since   streamed                      // what the stream did to the tables of running backfills
	runs    map[string]string             // the run of each rule's current backfill worker
	// deferred holds the rules whose backfills wait for the slot: at the
	// first start, rows are read only once the slot's consistent point is
	// fixed, so that every row is either read or streamed.
	deferred deferral
	cleaner  *backfill.Cleaner // of the batches of given-up backfills
}

// deferral is the backfills waiting for the slot (see backfills.deferred).
type deferral struct {
	on    bool
	rules []*rules.Rule
}

// sourceChecker tells whether a rule's backfill waits for the marker of its
// new source table (watch.newSource).
type sourceChecker interface {
	newSource(ctx context.Context, r *rules.Rule) (bool, error)
}

func newBackfills(b *base, res *results, c calls.Cost) *backfills {
	return &backfills{base: b, res: res, cost: c, workers: map[string]context.CancelFunc{}, pages: make(chan *backfill.Page),
		pending: map[string]*backfill.Page{}, rows: map[string]*progress{}, runs: map[string]string{},
		since:   streamed{seen: map[uint32]map[keyDigest]uint64{}, truncated: map[uint32]uint64{}, started: map[string]uint64{}, tables: map[string]uint32{}},
		cleaner: backfill.NewCleaner(b.spawn, b.log, b.dsn.Target)}
}

// keyDigest identifies a source row by a digest of its source_key JSON.
type keyDigest [16]byte

func digestKey(keyJSON []byte) keyDigest {
	var d keyDigest
	sum := sha256.Sum256(keyJSON)
	copy(d[:], sum[:])
	return d
}

// streamed is what the stream did to the source tables of running
// backfills, ordered by a clock on the engine's goroutine: a backfill leaves
// to the stream only what the stream did after it started.
type streamed struct {
	clock uint64
	// seen: per source table with a running backfill, the keys of rows the
	// stream changed since, each at its clock.
	seen map[uint32]map[keyDigest]uint64
	// truncated: per source table with a running backfill, the clock of its
	// last truncate.
	truncated map[uint32]uint64
	started   map[string]uint64 // the clock of each running backfill's start, by rule
	tables    map[string]uint32 // the source table of each running backfill, by rule
}

// touch records that the stream changed the row keyed keyJSON of table oid,
// while a backfill of that table runs: the backfill then leaves the row to
// the stream, whose version is at least as new as any page's.
func (b *streamed) touch(oid uint32, keyJSON []byte) {
	if seen := b.seen[oid]; seen != nil {
		b.clock++
		seen[digestKey(keyJSON)] = b.clock
	}
}

// truncate records that table oid was truncated: pages of its running
// backfills read before it must not bring rows back.
func (b *streamed) truncate(oid uint32) {
	if b.seen[oid] != nil {
		b.clock++
		b.truncated[oid] = b.clock
	}
}

// begin records that rule's backfill of table oid starts now.
func (b *streamed) begin(rule string, oid uint32) {
	if b.seen[oid] == nil {
		b.seen[oid] = map[keyDigest]uint64{}
	}
	b.clock++
	b.started[rule], b.tables[rule] = b.clock, oid
}

// end forgets rule's backfill, and what was kept for its table when no
// other backfill of it runs: nothing is kept for a backfill that stopped,
// however it stopped.
func (b *streamed) end(rule string) {
	oid, ok := b.tables[rule]
	if !ok {
		return
	}
	delete(b.started, rule)
	delete(b.tables, rule)
	for _, other := range b.tables {
		if other == oid {
			return
		}
	}
	delete(b.seen, oid)
	delete(b.truncated, oid)
}

// streamedSince reports whether the stream changed the row keyed keyJSON
// of rule's table after rule's backfill started: the stream's version is
// then at least as new as any page's.
func (b *streamed) streamedSince(rule string, keyJSON []byte) bool {
	st, oid := b.started[rule], b.tables[rule]
	return b.seen[oid][digestKey(keyJSON)] > st
}

// truncatedSince reports whether rule's table was truncated after its
// backfill started: what its pages read before is gone.
func (b *streamed) truncatedSince(rule string) bool {
	return b.truncated[b.tables[rule]] > b.started[rule]
}

// register keeps a page read by a worker until its marker message arrives;
// a withdrawn page (its marker could not be written: it is read again) is
// let go.
func (b *backfills) register(p *backfill.Page) {
	if p.Withdrawn {
		if q := b.pending[p.ID]; q != nil {
			delete(b.pending, p.ID)
			close(q.Applied)
		}
		return
	}
	b.pending[p.ID] = p
}

// deferUntilSlot makes the backfills started from now on wait for
// startDeferred.
func (b *backfills) deferUntilSlot() { b.deferred.on = true }

// cleanup has the batches of the backfills that d gave up cancelled and
// deleted at their providers.
func (b *backfills) cleanup(ctx context.Context, d rules.Diff) { b.cleaner.Start(d.BatchAPIs) }

// running reports whether a backfill worker of rule name runs.
func (b *backfills) running(name string) bool {
	_, ok := b.workers[name]
	return ok
}

// startBackfill starts or resumes the backfill of r, unless it is done for
// what r computes (its fingerprint). While the engine defers (at the first
// start, before the slot exists), it only records r.
func (b *backfills) start(ctx context.Context, r *rules.Rule) error {
	if b.deferred.on {
		b.deferred.rules = append(b.deferred.rules, r)
		return nil
	}
	if wait, err := b.sources.newSource(ctx, r); wait || err != nil {
		return err // it starts at the marker of its new source table
	}
	src, tgt, err := b.conns.Conns(ctx)
	if err != nil {
		return err
	}
	st, found, err := state.LoadBackfill(ctx, tgt, r.Name)
	if err != nil {
		return err
	}
	last, stop := st.LastKey, st.StopKey
	switch {
	case found && st.State == value.BackfillDone && r.Done(st.Fingerprint):
		if st.Fingerprint != r.Fingerprint { // stored before versions were recorded
			return state.Refingerprint(ctx, tgt, r.Name, st.Fingerprint, r.Fingerprint)
		}
		return nil
	case found && st.Fingerprint == r.Fingerprint:
		b.log.Info("backfill resumed", "rule", r.Name, "after", string(last))
	default:
		// Rows beyond the greatest key of now are new: the stream has them.
		last, stop = nil, nil
		rows, err := backfill.ReadRows(ctx, src, r, backfill.LastRowSQL(r))
		if err != nil {
			return fmt.Errorf("start backfill of %s: %w", r.Name, err)
		}
		if len(rows) == 1 {
			stop = rows[0].KeyJSON
		}
		if err := state.StartBackfill(ctx, tgt, r.Name, r.Fingerprint, stop, r.Source.OID); err != nil {
			return err
		}
		if stop == nil { // an empty table: nothing to do
			b.log.Info("backfill done", "rule", r.Name, "rows", 0)
			return nil
		}
		b.log.Info("backfill started", "rule", r.Name, "source", r.Source.String(), "up_to", string(stop))
	}
	b.stop(r.Name) // one worker per rule, also after a reload that failed half-way
	b.since.begin(r.Name, r.Source.OID)
	var nonce [16]byte
	rand.Read(nonce[:])
	run := hex.EncodeToString(nonce[:])
	b.runs[r.Name] = run
	w := backfill.NewWorker(b.log, backfill.NewPages(b.dsn.Source, b.dsn.Target), b.handPage, run)
	stopped, halt := context.WithCancel(context.Background())
	b.workers[r.Name] = halt
	job := func(ctx context.Context) { w.Work(ctx, r, last, stop) }
	if r.Fn.BatchAPI() != nil {
		d := backfill.BatchDeps{SourceDSN: b.dsn.Source, TargetDSN: b.dsn.Target}
		if b.cost.Daily != nil {
			d.Daily = b.cost.Daily
		}
		if b.cost.Budget != nil {
			d.Budget = b.cost.Budget
		}
		job = func(ctx context.Context) { backfill.Batch(ctx, b.log, w, r, last, stop, d) }
	}
	b.spawn.Go("backfill of "+r.Name, func(ctx context.Context) error {
		ctx, cancel := until(ctx, stopped)
		defer cancel()
		job(ctx)
		return nil
	})
	return nil
}

// until returns ctx, ended also when stopped ends.
func until(ctx, stopped context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	unhook := context.AfterFunc(stopped, cancel)
	return ctx, func() { unhook(); cancel() }
}

// startDeferred starts the backfills deferred until the slot existed.
func (b *backfills) startDeferred(ctx context.Context) error {
	rs := b.deferred.rules
	b.deferred = deferral{}
	for _, r := range rs {
		if b.rules.set.Named(r.Name) == r {
			if err := b.start(ctx, r); err != nil {
				return err
			}
		}
	}
	b.cleaner.Start(nil) // what starting them over gave up
	return nil
}

// stopBackfill stops the backfill worker of a rule, if one runs.
func (b *backfills) stop(name string) {
	if cancel, ok := b.workers[name]; ok {
		cancel()
		delete(b.workers, name)
	}
	delete(b.runs, name)
	b.since.end(name)
	delete(b.rows, name)
	for id, p := range b.pending { // its pages are never applied
		if p.Rule == name {
			delete(b.pending, id)
			close(p.Applied)
		}
	}
}

// handPage hands a worker's page to the engine's goroutine.
func (b *backfills) handPage(ctx context.Context, p *backfill.Page) error {
	select {
	case b.pages <- p:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// page applies the backfill page whose marker message m is, inside m's
// transaction: the rows as if inserted — except those whose version the
// engine streamed itself — and the progress.
func (b *backfills) page(ctx context.Context, m *replication.Message) error {
	var marker struct{ Page string }
	if json.Unmarshal(m.Content, &marker) != nil {
		return nil
	}
	p := b.pending[marker.Page]
	if p == nil {
		return nil // a page of an earlier run or of a stopped backfill
	}
	delete(b.pending, marker.Page)
	defer close(p.Applied)
	r := b.rules.set.Named(p.Rule)
	if r == nil || r.Fingerprint != p.Fingerprint || b.runs[p.Rule] != p.Run {
		return nil // the rule changed, went away or started again; its new backfill covers it
	}
	rows := p.Rows
	if b.since.truncatedSince(r.Name) {
		// The table was truncated since the backfill started: what the
		// page read before is gone, and every row since is streamed.
		rows = nil
	}
	lane := r.Target.Name()
	for i, row := range rows {
		pos, ok := b.out.admit(lane, i)
		if !ok || b.since.streamedSince(r.Name, row.KeyJSON) {
			continue
		}
		it, err := b.res.resultItem(ctx, r, row, false, false)
		if err != nil {
			return err
		}
		it.LSN = m.LSN
		if err := b.out.emit(ctx, pos, it); err != nil {
			return err
		}
	}
	if pos, ok := b.out.admit(lane, len(p.Rows)); ok {
		err := b.out.emit(ctx, pos, work.Item{Kind: work.Backfill, Rule: r.Ref(), Dest: work.Dest{Target: r.Target}, Progress: state.BackfillProgress{
			Rule: r.Name, Fingerprint: r.Fingerprint, LastKey: p.LastKey, Rows: len(p.Rows), Done: p.Done,
			Batch: r.Fn.BatchAPI() != nil, Part: p.Part, PartDone: p.PartDone}})
		if err != nil {
			return err
		}
	}
	pr := b.rows[r.Name]
	if pr == nil {
		pr = &progress{logged: time.Now()}
		b.rows[r.Name] = pr
	}
	pr.rows += len(p.Rows)
	if now := time.Now(); !p.Done && now.Sub(pr.logged) >= progressEvery {
		pr.logged = now
		b.log.Info("backfill progress", "rule", r.Name, "rows", pr.rows, "last_key", string(p.LastKey))
	}
	if p.Done {
		b.log.Info("backfill pages read", "rule", r.Name, "rows", pr.rows)
		b.stop(r.Name)
	}
	return nil
}
