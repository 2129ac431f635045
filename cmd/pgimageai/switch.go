package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/state"
)

// switchList is what `pgimageai switch` lists: the running switches (of
// one rule, or all) and the last that ended.
type switchList struct {
	Rule     string // "": every rule
	Switches []switchStatus
	History  []switchEnd
}

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
	l := switchList{Rule: q.Rule}
	if l.Switches, err = readSwitches(ctx, source, target, q.Rule); err != nil {
		return err
	}
	if l.History, err = state.SwitchHistory(ctx, target.conn, q.Rule, switchHistoryRows); err != nil {
		return target.explain("read the switch history", err)
	}
	return writeSwitchList(stdout, l, q.Format)
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
			why += fmt.Sprintf("; its last switch, to %s, ended %s at %s", versionText(h[0].To, h[0].ToModelID), h[0].Outcome, utcTime(h[0].EndedAt))
		}
		return fmt.Errorf("%w: %s", errUsage, why)
	case errors.Is(err, state.ErrSwitchAborted):
		return fmt.Errorf("%w: the switch of rule %s to %s is aborted already; a switch starts again when the rule's version changes again",
			errUsage, q.Rule, versionText(s.To, s.ToModelID))
	case err != nil:
		return target.explain("request the switch", err)
	}
	fmt.Fprintln(stdout, switchRequestText(s, req))
	return nil
}

// switchRequestText says what the bridge does with req on switch s.
func switchRequestText(s state.SwitchRequested, req string) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "rule %s: %s requested", s.Rule, req)
	switch s.Previous {
	case "":
	case req:
		b.WriteString(" (it was already, and the bridge has not taken it yet)")
	default:
		fmt.Fprintf(&b, " (it replaces the %s request the bridge had not taken yet)", s.Previous)
	}
	if req == state.SwitchForce {
		fmt.Fprintf(&b, "; the bridge switches the live column %s.%s to %s without waiting for the rows whose new result failed: they are NULL after the switch (it still waits for the side backfill, and for what else holds it)",
			s.TargetTable, catalog.QuoteIdent(s.Live), versionText(s.To, s.ToModelID))
	} else {
		fmt.Fprintf(&b, "; the bridge drops the shadow column %s.%s and the side rule %s's results, the live column keeps %s, and no switch starts again until the rule's version changes again",
			s.TargetTable, catalog.QuoteIdent(s.Shadow), s.Side, versionText(s.From, s.FromModelID))
	}
	b.WriteString("; a running bridge takes it within seconds, a stopped one when it starts, and pgimageai status shows it")
	return b.String()
}

// writeSwitchList renders l as format (table or json).
func writeSwitchList(w io.Writer, l switchList, format string) error {
	if format == formatJSON {
		return writeJSON(w, struct {
			Switches []switchJSON    `json:"switches"`
			History  []switchEndJSON `json:"switch_history"`
		}{switchesDocument(l.Switches), switchHistoryDocument(l.History)})
	}
	var buf bytes.Buffer
	if len(l.Switches) == 0 {
		if l.Rule != "" {
			fmt.Fprintf(&buf, "Switches: none running for rule %s\n", l.Rule)
		} else {
			buf.WriteString("Switches: none running\n")
		}
	} else {
		writeSwitches(&buf, l.Switches)
	}
	if len(l.History) > 0 {
		buf.WriteByte('\n')
		writeSwitchHistory(&buf, l.History)
	}
	_, err := w.Write(buf.Bytes())
	return err
}
