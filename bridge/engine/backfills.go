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
	"github.com/pgimageai/pgimageai/bridge/cost"
	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/state"
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
	srcDSN  string                        // for the workers' connections
	tgtDSN  string                        // for the workers' reads of stored inputs
	ctx     context.Context               // workers outlive a graceful stop's cancellation
	workers map[string]context.CancelFunc // running backfill workers by rule
	pages   chan *backfill.Page           // pages read by workers, for the engine's goroutine
	pending map[string]*backfill.Page     // pages waiting for their marker message
	rows    map[string]*progress          // rows read by each running backfill, for the log
	since   streamed                      // what the stream did to the tables of running backfills
	runs    map[string]string             // the run of each rule's current backfill worker
	// deferred holds the rules whose backfills wait for the slot: at the
	// first start, rows are read only once the slot's consistent point is
	// fixed, so that every row is either read or streamed.
	deferred  []*rules.Rule
	deferring bool
	cleaner   *backfill.Cleaner // of the batches of given-up backfills
}

func newBackfills(srcDSN, tgtDSN string, ctx context.Context) backfills {
	return backfills{srcDSN: srcDSN, tgtDSN: tgtDSN, ctx: ctx, workers: map[string]context.CancelFunc{}, pages: make(chan *backfill.Page),
		pending: map[string]*backfill.Page{}, rows: map[string]*progress{}, runs: map[string]string{},
		since: streamed{seen: map[uint32]map[keyDigest]uint64{}, truncated: map[uint32]uint64{}, started: map[string]uint64{}, tables: map[string]uint32{}}}
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

// Pages receives the pages that backfill workers read; the engine's
// goroutine passes each to Register.
func (e *Engine) Pages() <-chan *backfill.Page { return e.bf.pages }

// Register keeps a page read by a worker until its marker message arrives;
// a withdrawn page (its marker could not be written: it is read again) is
// let go.
func (e *Engine) Register(p *backfill.Page) {
	if p.Withdrawn {
		if q := e.bf.pending[p.ID]; q != nil {
			delete(e.bf.pending, p.ID)
			close(q.Applied)
		}
		return
	}
	e.bf.pending[p.ID] = p
}

// startBackfill starts or resumes the backfill of r, unless it is done for
// what r computes (its fingerprint). While the engine defers (at the first
// start, before the slot exists), it only records r.
func (e *Engine) startBackfill(ctx context.Context, r *rules.Rule) error {
	if e.bf.deferring {
		e.bf.deferred = append(e.bf.deferred, r)
		return nil
	}
	if wait, err := e.newSource(ctx, r); wait || err != nil {
		return err // it starts at the marker of its new source table
	}
	src, tgt, err := e.conns.Conns(ctx)
	if err != nil {
		return err
	}
	b, found, err := state.LoadBackfill(ctx, tgt, r.Name)
	if err != nil {
		return err
	}
	last, stop := b.LastKey, b.StopKey
	switch {
	case found && b.State == "done" && r.Done(b.Fingerprint):
		if b.Fingerprint != r.Fingerprint { // stored before versions were recorded
			return state.Refingerprint(ctx, tgt, r.Name, b.Fingerprint, r.Fingerprint)
		}
		return nil
	case found && b.Fingerprint == r.Fingerprint:
		e.log.Info("backfill resumed", "rule", r.Name, "after", string(last))
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
			e.log.Info("backfill done", "rule", r.Name, "rows", 0)
			return nil
		}
		e.log.Info("backfill started", "rule", r.Name, "source", r.Source.String(), "up_to", string(stop))
	}
	e.stopBackfill(r.Name) // one worker per rule, also after a reload that failed half-way
	e.bf.since.begin(r.Name, r.Source.OID)
	bctx, cancel := context.WithCancel(e.bf.ctx)
	e.bf.workers[r.Name] = cancel
	var nonce [16]byte
	rand.Read(nonce[:])
	run := hex.EncodeToString(nonce[:])
	e.bf.runs[r.Name] = run
	w := backfill.NewWorker(e.log, backfill.NewPages(e.bf.srcDSN, e.bf.tgtDSN), e.handPage, run)
	if r.Fn.BatchAPI() != nil {
		d := backfill.BatchDeps{SourceDSN: e.bf.srcDSN, TargetDSN: e.bf.tgtDSN}
		if e.calls.Daily != nil {
			d.Daily = e.calls.Daily
		}
		if e.calls.Budget != nil {
			d.Budget = e.calls.Budget
		}
		go backfill.Batch(bctx, e.log, w, r, last, stop, d)
		return nil
	}
	go w.Work(bctx, r, last, stop)
	return nil
}

// StartDeferred starts the backfills deferred until the slot existed.
func (e *Engine) StartDeferred(ctx context.Context) error {
	e.bf.deferring = false
	for _, r := range e.bf.deferred {
		if e.rules.set.Named(r.Name) == r {
			if err := e.startBackfill(ctx, r); err != nil {
				return err
			}
		}
	}
	e.bf.deferred = nil
	e.bf.cleaner.Start(e.bf.ctx, nil) // what starting them over gave up
	return nil
}

// stopBackfill stops the backfill worker of a rule, if one runs.
func (e *Engine) stopBackfill(name string) {
	if cancel, ok := e.bf.workers[name]; ok {
		cancel()
		delete(e.bf.workers, name)
	}
	delete(e.bf.runs, name)
	e.bf.since.end(name)
	delete(e.bf.rows, name)
	for id, p := range e.bf.pending { // its pages are never applied
		if p.Rule == name {
			delete(e.bf.pending, id)
			close(p.Applied)
		}
	}
}

// handPage hands a worker's page to the engine's goroutine.
func (e *Engine) handPage(ctx context.Context, p *backfill.Page) error {
	select {
	case e.bf.pages <- p:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// page applies the backfill page whose marker message m is, inside m's
// transaction: the rows as if inserted — except those whose version the
// engine streamed itself — and the progress.
func (e *Engine) page(ctx context.Context, m *replication.Message) error {
	var marker struct{ Page string }
	if json.Unmarshal(m.Content, &marker) != nil {
		return nil
	}
	p := e.bf.pending[marker.Page]
	if p == nil {
		return nil // a page of an earlier run or of a stopped backfill
	}
	delete(e.bf.pending, marker.Page)
	defer close(p.Applied)
	r := e.rules.set.Named(p.Rule)
	if r == nil || r.Fingerprint != p.Fingerprint || e.bf.runs[p.Rule] != p.Run {
		return nil // the rule changed, went away or started again; its new backfill covers it
	}
	rows := p.Rows
	if e.bf.since.truncatedSince(r.Name) {
		// The table was truncated since the backfill started: what the
		// page read before is gone, and every row since is streamed.
		rows = nil
	}
	lane := r.Target.Name()
	for i, row := range rows {
		pos, ok := e.admit(lane, i)
		if !ok || e.bf.since.streamedSince(r.Name, row.KeyJSON) {
			continue
		}
		it, err := e.resultItem(ctx, r, row, false, false)
		if err != nil {
			return err
		}
		it.LSN = m.LSN
		if err := e.emit(ctx, pos, it); err != nil {
			return err
		}
	}
	if pos, ok := e.admit(lane, len(p.Rows)); ok {
		err := e.emit(ctx, pos, work.Item{Kind: work.Backfill, Rule: r.Ref(), Dest: work.Dest{Target: r.Target}, Progress: state.BackfillProgress{
			Rule: r.Name, Fingerprint: r.Fingerprint, LastKey: p.LastKey, Rows: len(p.Rows), Done: p.Done,
			Batch: r.Fn.BatchAPI() != nil, Part: p.Part, PartDone: p.PartDone}})
		if err != nil {
			return err
		}
	}
	pr := e.bf.rows[r.Name]
	if pr == nil {
		pr = &progress{logged: time.Now()}
		e.bf.rows[r.Name] = pr
	}
	pr.rows += len(p.Rows)
	if now := time.Now(); !p.Done && now.Sub(pr.logged) >= progressEvery {
		pr.logged = now
		e.log.Info("backfill progress", "rule", r.Name, "rows", pr.rows, "last_key", string(p.LastKey))
	}
	if p.Done {
		e.log.Info("backfill pages read", "rule", r.Name, "rows", pr.rows)
		e.stopBackfill(r.Name)
	}
	return nil
}

// resultItem starts the function call of a row read from the source.
// fresh: see calls.Caller.Start; replay: the row was parked (see
// calls.Caller.Replay).
func (e *Engine) resultItem(ctx context.Context, r *rules.Rule, row backfill.Row, fresh, replay bool) (work.Item, error) {
	it := work.Item{Kind: work.Result, Rule: r.Ref(), Dest: work.Dest{Target: r.Target, SourceTable: r.Source.String()}, Row: work.Row{Key: row.Key, JSON: row.KeyJSON}}
	if r.Template != nil {
		e.memo.set(r.Name, row.KeyJSON, row.Prompt)
	}
	switch {
	case row.Over:
		// Not fetched: a too_large errors row, with the length and head.
		it.Call = work.Failed(r.Fn.TooLarge(row.Size, row.Head), row.Size, row.Head)
	case row.Valid:
		var err error
		var look *cost.Lookup
		if !row.Unstored && !e.lanes.Rows().Busy(r.Target.Name(), row.KeyJSON) {
			look = &cost.Lookup{KeyJSON: row.KeyJSON, Key: row.Key}
		}
		if it.Call = e.calls.Answered(r, row.Img, row.Prompt, row.Answer, look); it.Call != nil { // a batch answer
			break
		}
		if replay {
			it.Call, err = e.calls.Replay(ctx, r, look, row.Img, row.Prompt)
		} else {
			it.Call, err = e.calls.Start(ctx, r, look, row.Img, row.Prompt, fresh)
		}
		if err != nil {
			return work.Item{}, err
		}
	}
	return it, nil
}
