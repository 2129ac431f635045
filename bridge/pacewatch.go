package bridge

import (
	"context"
	"log/slog"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/internal/reconn"
	"github.com/pgimageai/pgimageai/internal/supervise"
	"github.com/pgimageai/pgimageai/metrics"
	"github.com/pgimageai/pgimageai/provider/pace"
	"github.com/pgimageai/pgimageai/state"
)

// paceWatch is what the pace watch (run) needs: where to store the pacing and the
// governors of the models the rules call now.
type paceWatch struct {
	log       *slog.Logger
	dsn, slot string
	every     time.Duration
	governors func() map[string]*pace.Governor
	lanes     func() []metrics.Lane // what each lane holds, for pgimageai.lane_pending
}

// run reports the models' pacing every w.every while this instance
// leads: the log says once when a model becomes rate-limited (a 429 within
// the last minute) and once when it recovers, rather than a line per row;
// pgimageai.model_pace holds the pacing for status, and
// pgimageai.lane_pending what each lane holds. Storing is best effort:
// a failure is logged once and tried again at the next tick. It runs on a
// goroutine of the leadership (supervise) until ctx ends or its soft stop.
func (w paceWatch) run(ctx context.Context) error {
	ctx, cancel := supervise.Soft(ctx)
	defer cancel()
	conn := reconn.New("target", w.dsn, nil)
	defer conn.Drop(context.WithoutCancel(ctx))
	limited := map[string]bool{}
	failing := false
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		ms := models(w.governors())
		for _, m := range ms {
			switch {
			case m.RateLimited && !limited[m.Name]:
				w.log.Warn("model rate-limited: its requests wait for the provider's pace; no row fails for it",
					"model", m.Name, "pace", m.Pace(), "rate_limited_last_minute", m.Limited, "concurrency", m.Concurrency())
			case !m.RateLimited && limited[m.Name]:
				w.log.Info("model no longer rate-limited", "model", m.Name, "pace", m.Pace(), "concurrency", m.Concurrency())
			}
		}
		clear(limited)
		for _, m := range ms {
			limited[m.Name] = m.RateLimited
		}
		rows := make([]state.ModelPace, len(ms))
		for i, m := range ms {
			rows[i] = state.ModelPace{Model: m.Name, InFlight: m.InFlight, Limit: m.Limit, Ceil: m.Ceiling, LimitBy: string(m.LimitBy), Pace: m.Pace(),
				Limited1m: m.Limited, Answered1m: m.Answered, Waited: m.Waited, RateLimited: m.RateLimited}
		}
		var held []state.LanePending
		if w.lanes != nil {
			for _, l := range w.lanes() {
				held = append(held, state.LanePending{Lane: l.Name, Pending: l.Pending, Oldest: l.Oldest})
			}
		}
		err := conn.Do(ctx, func(c *pgx.Conn) error {
			if err := state.WriteModelPace(ctx, c, w.slot, rows); err != nil {
				return err
			}
			return state.WriteLanePending(ctx, c, w.slot, held)
		})
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			w.log.Warn("storing the models' pacing and the lanes' pending changes for status failed; trying again", "err", err)
			failing = true
		case err == nil:
			failing = false
		}
	}
}

// models snapshots the governors, by model name.
func models(gs map[string]*pace.Governor) []metrics.Model {
	ms := make([]metrics.Model, 0, len(gs))
	for name, g := range gs {
		ms = append(ms, metrics.Model{Name: name, Snapshot: g.Snapshot()})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Name < ms[j].Name })
	return ms
}
