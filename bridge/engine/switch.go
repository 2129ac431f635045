package engine

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/bridge/switchover"
	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

// switches is the engine's side of the version switches: the coordinator
// of their watchers and markers, and the marker being applied. It is used
// by the engine's goroutine only.
type switches struct {
	co       *switchover.Coordinator
	switched map[string]bool      // rules switched at a marker: their new rule does not backfill
	atMarker *replication.Message // the marker being applied: items go to its position
	sub      int                  // the next item's number at atMarker
}

// lockTimeout bounds how long a switch (or a shadow column's drop) waits
// for its lock on the target table: readers queue behind a waiting ALTER,
// so it gives up and the lane tries again rather than stall them.
const lockTimeout = 2 * time.Second

// Switches returns the watchers' reports, for the pipeline to hand to
// Switchover on the engine's goroutine.
func (e *Engine) Switches() <-chan switchover.Report { return e.sw.co.Reports() }

// Switchover takes a watcher's report: it places the marker at which the
// engine switches the rule (or takes the abort), unless one is placed.
func (e *Engine) Switchover(rep switchover.Report) {
	if e.sw.co.Placed(rep.Side) {
		return
	}
	r := e.rules.set.Named(rep.Side)
	if r == nil || r.Fingerprint != rep.SideFP {
		return // the side rule changed or went: its watcher is stopped
	}
	e.sw.co.Place(switchover.Marker{Report: &rep})
}

// drops has the lanes drop given-up side work: at once when the engine is
// applying one of its markers (its items take the marker's position),
// else at a marker placed for it.
func (e *Engine) drops(ctx context.Context, drops []rules.Drop) error {
	for _, d := range drops {
		if e.sw.co.DropPlaced(d.Side) {
			continue // its marker is on its way
		}
		if e.sw.atMarker == nil {
			e.sw.co.Place(switchover.Marker{Drop: &d})
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
	if r := e.rules.set.Named(d.Side); r != nil && r.Switching != nil && r.Switching.To == d.To {
		return nil // the same side work runs again (the rule came back): nothing to drop
	}
	gone := state.SideGone{Rule: d.Rule, Side: d.Side, From: d.From, To: d.To, Aborted: d.Aborted, StartedAt: d.StartedAt}
	var target *sink.Target
	if rs := e.rules.set.ForTarget(d.TargetTable); len(rs) > 0 {
		target = rs[0].Target
	} else {
		tgt, err := e.conns.Tgt.Get(ctx)
		if err != nil {
			return err
		}
		table, err := catalog.Lookup(ctx, tgt, d.TargetTable)
		if errors.Is(err, catalog.ErrNoTable) {
			// The target table is gone, and its shadow column with it:
			// only the bookkeeping is left, and no lane writes the table.
			e.log.Info("side work given up; its target table is gone", "rule", d.Rule, "side", d.Side)
			b := &pgx.Batch{}
			gone.Queue(b)
			return pgx.BeginFunc(ctx, tgt, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() })
		}
		if err != nil {
			return err
		}
		target = sink.TableTarget(table)
		defer e.lanes.Retire(target.Name()) // once the drop is written
	}
	e.log.Info("side work given up: dropping its shadow column", "rule", d.Rule, "side", d.Side, "to", d.To, "shadow", d.Shadow, "aborted", d.Aborted)
	ops := []sink.Op{sink.DropShadow{Table: target.Table.Identifier(), Shadow: d.Shadow, LockTimeout: lockTimeout}, gone}
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
	mk, ok := e.sw.co.Take(m.Content)
	if !ok {
		return nil
	}
	e.sw.atMarker, e.sw.sub = m, 0
	defer func() { e.sw.atMarker = nil }()
	switch {
	case mk.Drop != nil:
		return e.dropNow(ctx, *mk.Drop)
	case mk.Report.Abort:
		// The reload finds the request: the rule runs its old version
		// only, and the side work is dropped here.
		return e.reconfigure(ctx, "aborting the switch of "+mk.Report.Rule, nil)
	}
	return e.switchNow(ctx, *mk.Report)
}

// switchNow switches rep's rule to its new version at the marker being
// applied: from here on the rule writes the new version into the live
// column, behind the switch transaction in its lane.
func (e *Engine) switchNow(ctx context.Context, rep switchover.Report) error {
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
		// Its side rule did not compile this time (see the invalid_rule
		// row): the live rule runs on, and the watcher of the side rule,
		// once it compiles again, reports again.
		e.rules.live.SwitchNow(rep.Rule, "")
		e.log.Warn("the rule could not be switched now; the live column keeps its version", "rule", rep.Rule, "to", rep.To)
		return nil
	}
	e.log.Info("switching the rule's live column to its new version", "rule", rep.Rule, "from", s.From, "to", s.To,
		"target", r.Target.Name(), "column", s.Live, "forced", rep.Forced, "indexes", len(rep.Indexes))
	ops := []sink.Op{
		state.SwitchDone{Rule: rep.Rule, Side: rep.Side, To: s.To, Fingerprint: r.Fingerprint},
		sink.Switch{Table: r.Target.Table.Identifier(), Live: s.Live, Shadow: s.Shadow, Indexes: rep.Indexes, LockTimeout: lockTimeout},
		state.SwitchEnded{Rule: rep.Rule, From: s.From, To: s.To, Forced: rep.Forced, StartedAt: s.StartedAt, LockMillisSQL: sink.LockMillisSQL},
	}
	return e.pushAtMarker(ctx, work.Item{Kind: work.Switch, Rule: r.Ref(), Dest: work.Dest{Target: r.Target}, Ops: ops})
}
