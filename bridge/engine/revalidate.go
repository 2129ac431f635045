package engine

import (
	"context"
)

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
	changed, err := e.rules.live.Revalidate(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		e.conns.Close(ctx) // on fresh sessions
		e.log.Warn("checking the followed tables' replica identities failed; retrying at the next check", "err", err)
		return nil
	}
	if len(changed) > 0 {
		e.rules.recheck = true
	}
	if e.rules.recheck {
		return e.Recheck(ctx)
	}
	return nil
}
