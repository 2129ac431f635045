package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge/rules"
)

// What a configuration change means: the rules reloaded (a reload returns a
// diff), and the diff applied — the new rules from the next change on, the
// backfills of changed and removed rules stopped, those of new and changed
// rules started, the side work of switches followed.

// backfiller starts and stops the backfills of rules (backfills.go).
type backfiller interface {
	start(ctx context.Context, r *rules.Rule) error
	stop(name string)
	deferUntilSlot()
	cleanup(ctx context.Context, d rules.Diff)
}

// sideWork follows the rules' version switches (switch.go).
type sideWork interface {
	switched(name string) bool
	follow(ctx context.Context, d rules.Diff) error
}

// configs applies the configuration changes that the WAL shows at their
// commit, and checks the rules again when asked.
type configs struct {
	*base
	bf backfiller
	sw sideWork
	// recheck: every rule is to be compiled again at the next Recheck,
	// not only the invalid ones (see RecheckNow); forced is when RecheckNow
	// last did.
	recheck bool
	forced  time.Time
}

// Load makes the engine follow the configuration as rules.Live has it
// loaded: the rule set, the publication, the invalid_rule rows. The
// backfills of its rules wait for StartDeferred: at the first start, rows
// are read only once the slot exists (pgoutput refuses to decode from
// before its publication existed, so the publication goes first).
func (e *Engine) Load(ctx context.Context) error {
	e.bf.deferUntilSlot()
	return e.cfg.reload(ctx)
}

// reload reloads the rules and applies the diff, once.
func (c *configs) reload(ctx context.Context) error {
	d, err := c.rules.live.Reload(ctx, []uint32{c.rules.tables.Rules, c.rules.tables.Models})
	if err != nil {
		return err
	}
	if err := c.apply(ctx, d); err != nil {
		return err
	}
	c.rules.live.Accept(d)
	return nil
}

// RecheckNow checks every rule against the catalog again, now or — inside
// a source transaction — at the next Recheck: a lane's target refused a
// write for want of a privilege, and compiling the rules finds which ones
// (invalid_rule, with the GRANT to run).
func (e *Engine) RecheckNow(ctx context.Context) error {
	e.cfg.recheck = true
	if time.Since(e.cfg.forced) < forcedEvery {
		return nil // at the next Recheck
	}
	e.cfg.forced = time.Now()
	return e.Recheck(ctx)
}

// forcedEvery bounds how often RecheckNow compiles every rule: a lane
// refused for want of a privilege asks again at every write it retries.
const forcedEvery = 5 * time.Second

// apply makes the engine follow a reload's diff: the new rules from the next
// change on, the backfills of changed and removed rules stopped, those of
// new and changed rules started.
func (c *configs) apply(ctx context.Context, d rules.Diff) error {
	old := c.rules.set
	if old == nil {
		old = rules.NewSet(nil)
	}
	c.rules.swap(d.Set)
	for _, name := range d.Stop {
		c.bf.stop(name)
		if d.Set.Named(name) == nil { // deleted, disabled or invalid, not changed
			c.metrics.ForgetRule(name)
		}
		// The lane of a target no rule writes any more stops once it has
		// written what it holds.
		if r := old.Named(name); r != nil && len(d.Set.ForTarget(r.Target.Name())) == 0 {
			c.lanes.Retire(r.Target.Name())
		}
	}
	now := d.Set.Models()
	for m := range old.Models() {
		if !now[m] {
			c.metrics.ForgetModel(m)
		}
	}
	for _, r := range d.Start {
		c.metrics.Known(r.Name, r.Model)
		if c.sw.switched(r.Name) {
			continue // its rows are the side rule's, switched: nothing to backfill
		}
		if err := c.bf.start(ctx, r); err != nil {
			return err
		}
	}
	if err := c.sw.follow(ctx, d); err != nil {
		return err
	}
	// The batches of the backfills given up above (pgimageai.batch_cleanup)
	// are cancelled and deleted at their providers.
	c.bf.cleanup(ctx, d)
	return nil
}

// reconfigure runs prepare (when set), reloads the rules and applies the
// diff, retried on fresh connections until it succeeds or ctx ends: no
// transaction after the change is processed under the old rules.
func (c *configs) reconfigure(ctx context.Context, what string, prepare func() error) error {
	return c.conns.Retrying(ctx, c.log, what, func(_, _ *pgx.Conn) error {
		if prepare != nil {
			if err := prepare(); err != nil {
				return err
			}
		}
		return c.reload(ctx)
	})
}

// commit applies the configuration changes of t, a transaction at its
// commit, and reloads the rules.
func (c *configs) commit(ctx context.Context, t *openTxn) error {
	if err := c.rules.live.Apply(c.typeMap, t.config, t.final); err != nil {
		return err
	}
	return c.reconfigure(ctx, fmt.Sprintf("applying the configuration change at %s", t.final), nil)
}

// misfit makes rules invalid_rule at this WAL position, where their table
// stopped fitting them, and reloads, so that the other rules go on.
func (c *configs) misfit(ctx context.Context, why map[string]string) error {
	c.rules.live.Misfit(why)
	return c.reconfigure(ctx, "invalidating rules after a schema change", nil)
}

// Rebackfill backfills the rules of lane from the start after its target
// table was dropped and made again (apply's repair): whatever it held is
// gone.
func (e *Engine) Rebackfill(ctx context.Context, lane string) error {
	return e.cfg.reconfigure(ctx, "re-creating target "+lane, func() error {
		names, err := e.b.rules.live.Forget(ctx, lane)
		for _, name := range names {
			e.bf.stop(name)
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
	c := e.cfg
	if e.b.out.open != nil || !c.rules.live.HasInvalid() && !c.recheck && !c.rules.live.Pending() {
		return nil
	}
	forced := c.recheck
	c.recheck = false
	restore := c.rules.live.Recheck()
	if err := c.reload(ctx); err != nil {
		restore() // so that the next check runs again
		c.recheck = forced
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c.conns.Close(ctx) // on fresh sessions
		c.log.Warn("checking invalid rules again failed; retrying at the next check", "err", err)
	}
	return nil
}

// Revalidate checks the replica identities of the followed tables
// (rules.Live.Revalidate): a table whose identity changed is synced in the
// publication at once — taken out when its identity no longer carries a
// key, so that the application's UPDATEs and DELETEs never fail for the
// bridge's sake — and its rules are compiled again at once or, inside a
// source transaction, at the next Revalidate or Recheck, reporting those
// that no longer fit.
//
// A failure (the source briefly unreachable) is logged and the check
// repeated next time; it never stops the bridge.
func (e *Engine) Revalidate(ctx context.Context) error {
	changed, err := e.b.rules.live.Revalidate(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		e.b.conns.Close(ctx) // on fresh sessions
		e.b.log.Warn("checking the followed tables' replica identities failed; retrying at the next check", "err", err)
		return nil
	}
	if len(changed) > 0 {
		e.cfg.recheck = true
	}
	if e.cfg.recheck {
		return e.Recheck(ctx)
	}
	return nil
}
