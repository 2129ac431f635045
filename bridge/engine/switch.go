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
	*base
	cfg      reloader
	co       *switchover.Coordinator
	atSwitch map[string]bool      // rules switched at a marker: their new rule does not backfill
	atMarker *replication.Message // the marker being applied: items go to its position
	sub      int                  // the next item's number at atMarker
}

// lockTimeout bounds how long a switch (or a shadow column's drop) waits
// for its lock on the target table: readers queue behind a waiting ALTER,
// so it gives up and the lane tries again rather than stall them.
const lockTimeout = 2 * time.Second

// switched reports whether rule name was switched at the marker being
// applied: its new rule does not backfill.
func (s *switches) switched(name string) bool { return s.atSwitch[name] }

// follow follows the side work of d's rules: their watchers, and the drops
// of given-up side work.
func (s *switches) follow(ctx context.Context, d rules.Diff) error {
	s.co.Follow(d.Set.Sides())
	return s.drops(ctx, d.Drops)
}

// report takes a watcher's report: it places the marker at which the
// engine switches the rule (or takes the abort), unless one is placed.
func (s *switches) report(rep switchover.Report) {
	if s.co.Placed(rep.Side) {
		return
	}
	r := s.rules.set.Named(rep.Side)
	if r == nil || r.Fingerprint != rep.SideFP {
		return // the side rule changed or went: its watcher is stopped
	}
	s.co.Place(switchover.Marker{Report: &rep})
}

// drops has the lanes drop given-up side work: at once when the engine is
// applying one of its markers (its items take the marker's position),
// else at a marker placed for it.
func (s *switches) drops(ctx context.Context, drops []rules.Drop) error {
	for _, d := range drops {
		if s.co.DropPlaced(d.Side) {
			continue // its marker is on its way
		}
		if s.atMarker == nil {
			s.co.Place(switchover.Marker{Drop: &d})
			continue
		}
		if err := s.dropNow(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

// dropNow pushes the drop of d's shadow column to its target's lane, at
// the marker being applied.
func (s *switches) dropNow(ctx context.Context, d rules.Drop) error {
	if r := s.rules.set.Named(d.Side); r != nil && r.Switching != nil && r.Switching.To == d.To {
		return nil // the same side work runs again (the rule came back): nothing to drop
	}
	gone := state.SideGone{Rule: d.Rule, Side: d.Side, From: d.From, To: d.To, Aborted: d.Aborted, StartedAt: d.StartedAt}
	var target *sink.Target
	if rs := s.rules.set.ForTarget(d.TargetTable); len(rs) > 0 {
		target = rs[0].Target
	} else {
		tgt, err := s.conns.Tgt.Get(ctx)
		if err != nil {
			return err
		}
		table, err := catalog.Lookup(ctx, tgt, d.TargetTable)
		if errors.Is(err, catalog.ErrNoTable) {
			// The target table is gone, and its shadow column with it:
			// only the bookkeeping is left, and no lane writes the table.
			s.log.Info("side work given up; its target table is gone", "rule", d.Rule, "side", d.Side)
			b := &pgx.Batch{}
			gone.Queue(b)
			return pgx.BeginFunc(ctx, tgt, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() })
		}
		if err != nil {
			return err
		}
		target = sink.TableTarget(table)
		defer s.lanes.Retire(target.Name()) // once the drop is written
	}
	s.log.Info("side work given up: dropping its shadow column", "rule", d.Rule, "side", d.Side, "to", d.To, "shadow", d.Shadow, "aborted", d.Aborted)
	ops := []sink.Op{sink.DropShadow{Table: target.Table.Identifier(), Shadow: d.Shadow, LockTimeout: lockTimeout}, gone}
	return s.pushAtMarker(ctx, work.Item{Kind: work.DropShadow, Dest: work.Dest{Target: target}, Ops: ops})
}

// pushAtMarker emits it at the position of the marker being applied.
func (s *switches) pushAtMarker(ctx context.Context, it work.Item) error {
	sub := s.sub
	s.sub++
	it.LSN = s.atMarker.LSN
	return s.out.place(ctx, sub, it) // unless written before a restart
}

// switchMarker applies a marker the engine placed: a switch, an abort, or
// a drop. A marker of an earlier run, or any other, does nothing.
func (s *switches) marker(ctx context.Context, m *replication.Message) error {
	mk, ok := s.co.Take(m.Content)
	if !ok {
		return nil
	}
	s.atMarker, s.sub = m, 0
	defer func() { s.atMarker = nil }()
	switch {
	case mk.Drop != nil:
		return s.dropNow(ctx, *mk.Drop)
	case mk.Report.Abort:
		// The reload finds the request: the rule runs its old version
		// only, and the side work is dropped here.
		return s.cfg.reconfigure(ctx, "aborting the switch of "+mk.Report.Rule, nil)
	}
	return s.switchNow(ctx, *mk.Report)
}

// switchNow switches rep's rule to its new version at the marker being
// applied: from here on the rule writes the new version into the live
// column, behind the switch transaction in its lane.
func (s *switches) switchNow(ctx context.Context, rep switchover.Report) error {
	side := s.rules.set.Named(rep.Side)
	if side == nil || side.Fingerprint != rep.SideFP {
		return nil // changed since: its new side work goes on
	}
	sw := *side.Switching
	s.atSwitch[rep.Rule] = true
	defer delete(s.atSwitch, rep.Rule)
	err := s.cfg.reconfigure(ctx, "switching rule "+rep.Rule, func() error {
		s.rules.live.SwitchNow(rep.Rule, rep.To)
		return nil
	})
	if err != nil {
		return err
	}
	r := s.rules.set.Named(rep.Rule)
	if r == nil || r.Version != rep.To || r.Switching != nil {
		// Its side rule did not compile this time (see the invalid_rule
		// row): the live rule runs on, and the watcher of the side rule,
		// once it compiles again, reports again.
		s.rules.live.SwitchNow(rep.Rule, "")
		s.log.Warn("the rule could not be switched now; the live column keeps its version", "rule", rep.Rule, "to", rep.To)
		return nil
	}
	s.log.Info("switching the rule's live column to its new version", "rule", rep.Rule, "from", sw.From, "to", sw.To,
		"target", r.Target.Name(), "column", sw.Live, "forced", rep.Forced, "indexes", len(rep.Indexes))
	ops := []sink.Op{
		state.SwitchDone{Rule: rep.Rule, Side: rep.Side, To: sw.To, Fingerprint: r.Fingerprint},
		sink.Switch{Table: r.Target.Table.Identifier(), Live: sw.Live, Shadow: sw.Shadow, Indexes: rep.Indexes, LockTimeout: lockTimeout},
		state.SwitchEnded{Rule: rep.Rule, From: sw.From, To: sw.To, Forced: rep.Forced, StartedAt: sw.StartedAt, LockMillisSQL: sink.LockMillisSQL},
	}
	return s.pushAtMarker(ctx, work.Item{Kind: work.Switch, Rule: r.Ref(), Dest: work.Dest{Target: r.Target}, Ops: ops})
}
