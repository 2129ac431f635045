package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/bridge/switchover"
	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

// switches is the engine's record of the version switches: their watchers,
// and the markers it placed in the WAL, at which it switches a rule, drops
// given-up side work, or takes an operator's abort. It is used by the
// engine's goroutine only; watchers report through reports.
type switches struct {
	reports  chan switchover.Report
	watchers map[string]watcher   // by side rule
	markers  map[string]marker    // by nonce, until read in the WAL
	placed   map[string]bool      // side rules with a marker placed and not yet read
	switched map[string]bool      // rules switched at a marker: their new rule does not backfill
	atMarker *replication.Message // the marker being applied: items go to its position
	sub      int                  // the next item's number at atMarker
}

type watcher struct {
	fingerprint string
	cancel      context.CancelFunc
}

// marker is what a placed marker does when the engine reads it.
type marker struct {
	report *switchover.Report // a switch, or an abort
	drop   *rules.Drop
}

func newSwitches() switches {
	return switches{reports: make(chan switchover.Report), watchers: map[string]watcher{}, markers: map[string]marker{},
		placed: map[string]bool{}, switched: map[string]bool{}}
}

// lockTimeout bounds how long a switch (or a shadow column's drop) waits
// for its lock on the target table: readers queue behind a waiting ALTER,
// so it gives up and the lane tries again rather than stall them.
const lockTimeout = 2 * time.Second

// Switches returns the watchers' reports, for the pipeline to hand to
// Switchover on the engine's goroutine.
func (e *Engine) Switches() <-chan switchover.Report { return e.sw.reports }

// Switchover takes a watcher's report: it places the marker at which the
// engine switches the rule (or takes the abort), unless one is placed.
func (e *Engine) Switchover(ctx context.Context, rep switchover.Report) {
	if e.sw.placed[rep.Side] {
		return
	}
	r := e.rules.set.Named(rep.Side)
	if r == nil || r.Fingerprint != rep.SideFP {
		return // the side rule changed or went: its watcher is stopped
	}
	e.place(ctx, rep.Side, marker{report: &rep})
}

// place registers a marker and writes it to the WAL from a goroutine of its
// own; a marker that could not be written is registered again later by
// whatever needs it (the watcher reports again; a drop is found again).
func (e *Engine) place(ctx context.Context, key string, m marker) {
	nonce := switchover.NewNonce()
	e.sw.markers[nonce] = m
	e.sw.placed[key] = true
	go func() {
		if err := switchover.Emit(e.bf.ctx, e.bf.srcDSN, nonce); err != nil && e.bf.ctx.Err() == nil {
			e.log.Warn("placing a switch marker failed; it is placed again when asked again", "err", err)
		}
	}()
}

// watch makes the watchers follow the side rules of set.
func (e *Engine) watch(set *rules.Set) {
	sides := map[string]*rules.Rule{}
	for _, r := range set.Sides() {
		sides[r.Name] = r
	}
	for name, w := range e.sw.watchers {
		if r := sides[name]; r == nil || r.Fingerprint != w.fingerprint {
			w.cancel()
			delete(e.sw.watchers, name)
			delete(e.sw.placed, name)
		}
	}
	for name, r := range sides {
		if _, ok := e.sw.watchers[name]; ok {
			continue
		}
		s := r.Switching
		ctx, cancel := context.WithCancel(e.bf.ctx)
		e.sw.watchers[name] = watcher{fingerprint: r.Fingerprint, cancel: cancel}
		w := switchover.Watch{Rule: s.Rule, Side: r.Name, SideFP: r.Fingerprint, To: s.To, Table: r.Target.Table, Live: s.Live, Shadow: s.Shadow}
		go switchover.Run(ctx, e.log, e.bf.tgtDSN, w, e.sw.reports)
	}
}

// StopWatchers stops every switch watcher (the engine stops).
func (e *Engine) StopWatchers() {
	for name, w := range e.sw.watchers {
		w.cancel()
		delete(e.sw.watchers, name)
	}
}

// drops has the lanes drop given-up side work: at once when the engine is
// applying one of its markers (its items take the marker's position),
// else at a marker placed for it.
func (e *Engine) drops(ctx context.Context, drops []rules.Drop) error {
	for _, d := range drops {
		if e.sw.atMarker == nil {
			if !e.sw.placed[d.Side] {
				e.place(ctx, d.Side, marker{drop: &d})
			}
			continue
		}
		if err := e.dropNow(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

// dropNow pushes the drop of d's shadow column to its target's lane, at
// the marker being applied.
func (e *Engine) dropNow(ctx context.Context, d rules.Drop) error {
	var target *sink.Target
	if rs := e.rules.set.ForTarget(d.TargetTable); len(rs) > 0 {
		target = rs[0].Target
	} else {
		tgt, err := e.conns.Tgt.Get(ctx)
		if err != nil {
			return err
		}
		table, err := catalog.Lookup(ctx, tgt, d.TargetTable)
		if err != nil {
			// The target table is gone, and its shadow column with it.
			e.log.Info("side work given up; its target table is gone", "rule", d.Rule, "side", d.Side, "err", err)
			return nil
		}
		target = sink.TableTarget(table)
		defer e.lanes.Retire(target.Name()) // once the drop is written
	}
	e.log.Info("side work given up: dropping its shadow column", "rule", d.Rule, "side", d.Side, "to", d.To, "shadow", d.Shadow, "aborted", d.Aborted)
	ops := []sink.Op{sink.DropShadow{Table: target.Table, Shadow: d.Shadow, LockTimeout: lockTimeout},
		state.SideGone{Rule: d.Rule, Side: d.Side, From: d.From, To: d.To, Aborted: d.Aborted, StartedAt: d.StartedAt}}
	return e.pushAtMarker(ctx, work.Item{Kind: work.DropShadow, Dest: work.Dest{Target: target}, Ops: ops})
}

// pushAtMarker emits it at the position of the marker being applied.
func (e *Engine) pushAtMarker(ctx context.Context, it work.Item) error {
	sub := e.sw.sub
	e.sw.sub++
	pos, ok := e.admit(it.Dest.Target.Name(), sub)
	if !ok {
		return nil // written before a restart
	}
	it.LSN = e.sw.atMarker.LSN
	return e.emit(ctx, pos, it)
}

// switchMarker applies a marker the engine placed: a switch, an abort, or
// a drop. A marker of an earlier run, or any other, does nothing.
func (e *Engine) switchMarker(ctx context.Context, m *replication.Message) error {
	nonce, ok := switchover.ParseMarker(m.Content)
	if !ok {
		return nil
	}
	mk, ok := e.sw.markers[nonce]
	if !ok {
		return nil
	}
	delete(e.sw.markers, nonce)
	e.sw.atMarker, e.sw.sub = m, 0
	defer func() { e.sw.atMarker = nil }()
	switch {
	case mk.drop != nil:
		delete(e.sw.placed, mk.drop.Side)
		return e.dropNow(ctx, *mk.drop)
	case mk.report.Abort:
		delete(e.sw.placed, mk.report.Side)
		// The reload finds the request: the rule runs its old version
		// only, and the side work is dropped here.
		return e.reconfigure(ctx, "aborting the switch of "+mk.report.Rule, nil)
	}
	return e.switchNow(ctx, *mk.report)
}

// switchNow switches rep's rule to its new version at the marker being
// applied: from here on the rule writes the new version into the live
// column, behind the switch transaction in its lane.
func (e *Engine) switchNow(ctx context.Context, rep switchover.Report) error {
	delete(e.sw.placed, rep.Side)
	side := e.rules.set.Named(rep.Side)
	if side == nil || side.Fingerprint != rep.SideFP {
		return nil // changed since: its new side work goes on
	}
	s := *side.Switching
	e.sw.switched[rep.Rule] = true
	defer delete(e.sw.switched, rep.Rule)
	err := e.reconfigure(ctx, "switching rule "+rep.Rule, func() error {
		e.rules.live.SwitchNow(rep.Rule, rep.To)
		return nil
	})
	if err != nil {
		return err
	}
	r := e.rules.set.Named(rep.Rule)
	if r == nil || r.Version != rep.To || r.Switching != nil {
		return fmt.Errorf("switching rule %s to version %s: the rule did not compile as switched", rep.Rule, rep.To)
	}
	e.log.Info("switching the rule's live column to its new version", "rule", rep.Rule, "from", s.From, "to", s.To,
		"target", r.Target.Name(), "column", s.Live, "forced", rep.Forced, "indexes", len(rep.Indexes))
	ops := []sink.Op{
		state.SwitchDone{Rule: rep.Rule, Side: rep.Side, To: s.To, Fingerprint: r.Fingerprint},
		sink.Switch{Table: r.Target.Table, Live: s.Live, Shadow: s.Shadow, Indexes: rep.Indexes, LockTimeout: lockTimeout},
		state.SwitchEnded{Rule: rep.Rule, From: s.From, To: s.To, Forced: rep.Forced, StartedAt: s.StartedAt, LockMillisSQL: sink.LockMillisSQL},
	}
	return e.pushAtMarker(ctx, work.Item{Kind: work.Switch, Rule: r, Dest: work.Dest{Target: r.Target}, Ops: ops})
}
