package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/pgimageai/pgimageai/cmd/pgimageai/internal/render"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/state"
)

// switchCommand lists the running switches or, with --force or --abort,
// asks the bridge to force or abort the switch of --rule: it sets
// pgimageai.switches.request on the target, where the bridge looks.
func switchCommand(ctx context.Context, c config, stdout, _ io.Writer) error {
	q := c.Query
	if q.Force || q.Abort {
		target, err := connectTarget(ctx, c)
		if err != nil {
			return err
		}
		defer target.close(ctx)
		return requestSwitch(ctx, target, q, stdout)
	}
	source, target, closeAll, err := connectBoth(ctx, c)
	if err != nil {
		return err
	}
	defer closeAll()
	l := render.SwitchList{Rule: q.Rule}
	if l.Switches, err = readSwitches(ctx, source, target, q.Rule); err != nil {
		return err
	}
	if l.History, err = state.SwitchHistory(ctx, target.conn, q.Rule, render.SwitchHistoryRows); err != nil {
		return target.explain("read the switch history", err)
	}
	return render.WriteSwitchList(stdout, l, q.Format)
}

// requestSwitch sets q's request on the switch of q.Rule and says what the
// bridge will do.
func requestSwitch(ctx context.Context, target *database, q queryFlags, stdout io.Writer) error {
	req := state.SwitchForce
	if q.Abort {
		req = state.SwitchAbort
	}
	s, err := state.RequestSwitch(ctx, target.conn, q.Rule, req)
	switch {
	case errors.Is(err, state.ErrNoSwitch):
		why := fmt.Sprintf("rule %s has no running switch (pgimageai switch lists them)", q.Rule)
		if h, herr := state.SwitchHistory(ctx, target.conn, q.Rule, 1); herr == nil && len(h) > 0 {
			why += fmt.Sprintf("; its last switch, to %s, ended %s at %s", render.VersionText(h[0].To, h[0].ToModelID), h[0].Outcome, render.UTCTime(h[0].EndedAt))
		}
		return fmt.Errorf("%w: %s", errUsage, why)
	case errors.Is(err, state.ErrSwitchAborted):
		return fmt.Errorf("%w: the switch of rule %s to %s is aborted already; a switch starts again when the rule's version changes again",
			errUsage, q.Rule, render.VersionText(s.To, s.ToModelID))
	case err != nil:
		return target.explain("request the switch", err)
	}
	fmt.Fprintln(stdout, render.SwitchRequestText(s, req))
	return nil
}

// readSwitches reads the running switches (of rule only, unless rule is
// "") from the target and prices them with the models of the source.
func readSwitches(ctx context.Context, source, target *database, rule string) ([]render.SwitchStatus, error) {
	running, err := state.RunningSwitches(ctx, target.conn, rule)
	if err != nil {
		return nil, target.explain("read switches", err)
	}
	if len(running) == 0 {
		return nil, nil
	}
	models, err := state.Models(ctx, source.conn)
	if err != nil {
		return nil, source.explain("read models", err)
	}
	byName := map[string]provider.Prices{}
	for _, m := range models {
		byName[m.Name] = provider.PricesOf(m)
	}
	out := make([]render.SwitchStatus, len(running))
	for i, s := range running {
		out[i] = render.PriceSwitch(s, byName)
	}
	return out, nil
}

// readVersions reads what status shows of versions: the results by
// version, the running switches and the last that ended.
func readVersions(ctx context.Context, source, target *database) (versions []state.ResultVersion, switches []render.SwitchStatus, history []state.SwitchEnd, err error) {
	if versions, err = state.ResultVersions(ctx, target.conn); err != nil {
		return nil, nil, nil, target.explain("count results by version", err)
	}
	if switches, err = readSwitches(ctx, source, target, ""); err != nil {
		return nil, nil, nil, err
	}
	if history, err = state.SwitchHistory(ctx, target.conn, "", render.SwitchHistoryRows); err != nil {
		return nil, nil, nil, target.explain("read the switch history", err)
	}
	return versions, switches, history, nil
}
