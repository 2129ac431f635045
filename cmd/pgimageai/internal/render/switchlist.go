package render

import (
	"bytes"
	"fmt"
	"io"

	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/state"
)

// SwitchList is what `pgimageai switch` lists: the running switches (of
// one rule, or all) and the last that ended.
type SwitchList struct {
	Rule     string // "": every rule
	Switches []SwitchStatus
	History  []switchEnd
}

// SwitchRequestText says what the bridge does with req on switch s.
func SwitchRequestText(s state.SwitchRequested, req string) string {
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
			s.TargetTable, catalog.QuoteIdent(s.Live), VersionText(s.To, s.ToModelID))
	} else {
		fmt.Fprintf(&b, "; the bridge drops the shadow column %s.%s and the side rule %s's results, the live column keeps %s, and no switch starts again until the rule's version changes again",
			s.TargetTable, catalog.QuoteIdent(s.Shadow), s.Side, VersionText(s.From, s.FromModelID))
	}
	b.WriteString("; a running bridge takes it within seconds, a stopped one when it starts, and pgimageai status shows it")
	return b.String()
}

// WriteSwitchList renders l as format (table or json).
func WriteSwitchList(w io.Writer, l SwitchList, format string) error {
	if format == FormatJSON {
		return JSON(w, struct {
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
