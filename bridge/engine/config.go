package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgimageai/pgimageai/bridge/rules"
)

// Load makes the engine follow the configuration as rules.Live has it
// loaded: the rule set, the publication, the invalid_rule rows. The
// backfills of its rules wait for StartDeferred: at the first start, rows
// are read only once the slot exists (pgoutput refuses to decode from
// before its publication existed, so the publication goes first).
func (e *Engine) Load(ctx context.Context) error {
	e.bf.deferring = true
	return e.reload(ctx)
}

// reload reloads the rules and applies the diff, once.
func (e *Engine) reload(ctx context.Context) error {
	d, err := e.rules.live.Reload(ctx, e.configTables())
	if err != nil {
		return err
	}
	if err := e.apply(ctx, d); err != nil {
		return err
	}
	e.rules.live.Accept(d)
	return nil
}

// RecheckNow checks every rule against the catalog again, now or — inside
// a source transaction — at the next Recheck: a lane's target refused a
// write for want of a privilege, and compiling the rules finds which ones
// (invalid_rule, with the GRANT to run).
func (e *Engine) RecheckNow(ctx context.Context) error {
	e.rules.recheck = true
	if time.Since(e.rules.forced) < forcedEvery {
		return nil // at the next Recheck
	}
	e.rules.forced = time.Now()
	return e.Recheck(ctx)
}

// forcedEvery bounds how often RecheckNow compiles every rule: a lane
// refused for want of a privilege asks again at every write it retries.
const forcedEvery = 5 * time.Second

// configTables returns the OIDs of pgimageai.rules and pgimageai.models.
func (e *Engine) configTables() []uint32 {
	return []uint32{e.rules.tables.Rules, e.rules.tables.Models}
}

// apply makes the engine follow a reload's diff: the new rules from the next
// change on, the backfills of changed and removed rules stopped, those of
// new and changed rules started.
func (e *Engine) apply(ctx context.Context, d rules.Diff) error {
	old := e.rules.set
	if old == nil {
		old = rules.NewSet(nil)
	}
	e.swap(d.Set)
	for _, name := range d.Stop {
		e.stopBackfill(name)
		if d.Set.Named(name) == nil { // deleted, disabled or invalid, not changed
			e.metrics.ForgetRule(name)
		}
		// The lane of a target no rule writes any more stops once it has
		// written what it holds.
		if r := old.Named(name); r != nil && len(d.Set.ForTarget(r.Target.Name())) == 0 {
			e.lanes.Retire(r.Target.Name())
		}
	}
	now := d.Set.Models()
	for m := range old.Models() {
		if !now[m] {
			e.metrics.ForgetModel(m)
		}
	}
	for _, r := range d.Start {
		e.metrics.Known(r.Name, r.Model)
		if e.sw.switched[r.Name] {
			continue // its rows are the side rule's, switched: nothing to backfill
		}
		if err := e.startBackfill(ctx, r); err != nil {
			return err
		}
	}
	e.sw.co.Follow(d.Set.Sides())
	if err := e.drops(ctx, d.Drops); err != nil {
		return err
	}
	// The batches of the backfills given up above (pgimageai.batch_cleanup)
	// are cancelled and deleted at their providers.
	e.bf.cleaner.Start(d.BatchAPIs)
	return nil
}

// reconfigure runs prepare (when set), reloads the rules and applies the
// diff, retried on fresh connections until it succeeds or ctx ends: no
// transaction after the change is processed under the old rules.
func (e *Engine) reconfigure(ctx context.Context, what string, prepare func() error) error {
	return e.conns.Retrying(ctx, e.log, what, func(_, _ *pgx.Conn) error {
		if prepare != nil {
			if err := prepare(); err != nil {
				return err
			}
		}
		return e.reload(ctx)
	})
}

// commit applies the configuration changes of t, a transaction at its
// commit, and reloads the rules.
func (e *Engine) commit(ctx context.Context, t *openTxn) error {
	if err := e.rules.live.Apply(e.typeMap, t.config, t.final); err != nil {
		return err
	}
	return e.reconfigure(ctx, fmt.Sprintf("applying the configuration change at %s", t.final), nil)
}

// misfit makes rules invalid_rule at this WAL position, where their table
// stopped fitting them, and reloads, so that the other rules go on.
func (e *Engine) misfit(ctx context.Context, why map[string]string) error {
	e.rules.live.Misfit(why)
	return e.reconfigure(ctx, "invalidating rules after a schema change", nil)
}

// Rebackfill backfills the rules of lane from the start after its target
// table was dropped and made again (apply's repair): whatever it held is
// gone.
func (e *Engine) Rebackfill(ctx context.Context, lane string) error {
	return e.reconfigure(ctx, "re-creating target "+lane, func() error {
		names, err := e.rules.live.Forget(ctx, lane)
		for _, name := range names {
			e.stopBackfill(name)
		}
		return err
	})
}

// Recheck compiles the rules again when some are invalid and no source
// transaction is open: what made a rule invalid may be gone (a table or
// column created, a target fixed) without any change to the rule rows that
// would trigger a reload.
//
// A failure here (the target or source briefly unreachable) is logged and
// the check repeated next time; it never stops the bridge.
func (e *Engine) Recheck(ctx context.Context) error {
	if e.pos.open != nil || !e.rules.live.HasInvalid() && !e.rules.recheck && !e.rules.live.Pending() {
		return nil
	}
	forced := e.rules.recheck
	e.rules.recheck = false
	restore := e.rules.live.Recheck()
	if err := e.reload(ctx); err != nil {
		restore() // so that the next check runs again
		e.rules.recheck = forced
		if ctx.Err() != nil {
			return ctx.Err()
		}
		e.conns.Close(ctx) // on fresh sessions
		e.log.Warn("checking invalid rules again failed; retrying at the next check", "err", err)
	}
	return nil
}
