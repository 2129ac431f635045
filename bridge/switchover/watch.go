package switchover

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/internal/pgconnect"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
	"github.com/pgimageai/pgimageai/value"
)

// Watch is one switch to watch: rule's side rule (Side, whose fingerprint is
// SideFP) computes version To into Shadow of Table, beside Live.
type Watch struct {
	Rule, Side, SideFP, To string
	Table                  *catalog.Table
	Live, Shadow           string
}

// Report is what a watcher tells the engine: the switch is ready (with the
// shadow indexes built, to be renamed by the switch), or an operator asked
// to abort it.
type Report struct {
	Watch
	Abort   bool
	Forced  bool // switched with failed rows left NULL
	Indexes []sink.IndexPlan
}

// Poll is how often a watcher reads its switch.
var Poll = 2 * time.Second

// resend is how many polls a watcher waits after reporting ready before it
// reports again (the engine ignores a report while its marker is pending).
const resend = 15

// Run watches w until ctx ends, stop is closed or the switch is gone,
// sending its reports to out. Failures to read are logged and retried at
// the next poll.
func Run(ctx context.Context, log *slog.Logger, tgtDSN string, w Watch, out chan<- Report, stop <-chan struct{}) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.WithoutCancel(ctx))
		}
	}()
	wait := Poll
	for {
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		case <-time.After(wait):
		}
		wait = Poll
		if conn == nil || conn.IsClosed() {
			var err error
			if conn, err = pgconnect.Connect(ctx, tgtDSN); err != nil {
				conn = nil
				log.Warn("switch watcher cannot reach the target; retrying", "rule", w.Rule, "err", err)
				continue
			}
		}
		rep, done, err := check(ctx, conn, w)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("switch watcher: reading the switch failed; retrying", "rule", w.Rule, "err", err)
			}
			conn.Close(ctx)
			conn = nil
			continue
		}
		if done {
			return
		}
		if rep == nil {
			continue
		}
		select {
		case out <- *rep:
		case <-ctx.Done():
			return
		case <-stop:
			return
		}
		wait = resend * Poll
	}
}

// check reads the switch of w once and records its state; it returns a
// report when the switch is ready or to be aborted, and done when it is
// gone.
func check(ctx context.Context, conn *pgx.Conn, w Watch) (*Report, bool, error) {
	st, err := state.LoadSwitchStatus(ctx, conn, w.Rule, w.To, w.Side, w.SideFP)
	if err != nil || st.Gone || st.Aborted {
		return nil, err == nil, err
	}
	if st.Request == value.SwitchAbort {
		return &Report{Watch: w, Abort: true}, false, nil
	}
	set := func(s value.SwitchState, detail string) error {
		return state.SetSwitchState(ctx, conn, w.Rule, w.To, s, detail)
	}
	if !st.Computed {
		return nil, false, set(value.SwitchComputing, "")
	}
	forced := st.Request == value.SwitchForce
	if st.Failed > 0 && !forced {
		return nil, false, set(value.SwitchHeld, fmt.Sprintf("%d rows failed with the new version (open errors of rule %s); retry them (pgimageai retry --rule %s) or switch with them left NULL (pgimageai switch --rule %s --force)",
			st.Failed, w.Side, w.Side, w.Rule))
	}
	obstacles, err := sink.SwitchObstacles(ctx, conn, w.Table, w.Live)
	if err != nil {
		return nil, false, err
	}
	if len(obstacles) > 0 {
		return nil, false, set(value.SwitchHeld, strings.Join(obstacles, "; "))
	}
	plans, err := sink.ShadowIndexes(ctx, conn, w.Table, w.Live, w.Shadow)
	if err != nil {
		return nil, false, set(value.SwitchHeld, err.Error())
	}
	if len(plans) > 0 {
		if err := set(value.SwitchIndexing, ""); err != nil {
			return nil, false, err
		}
		if err := sink.BuildShadowIndexes(ctx, conn, plans); err != nil {
			return nil, false, set(value.SwitchHeld, "building the shadow column's indexes: "+err.Error())
		}
	}
	if err := set(value.SwitchReady, ""); err != nil {
		return nil, false, err
	}
	return &Report{Watch: w, Forced: forced, Indexes: plans}, false, nil
}
