package render

import (
	"bytes"
	"strconv"
	"time"

	"github.com/pgimageai/pgimageai/state"
)

// ModelHealth is one model's circuit as the slot's leader last changed it,
// with the rows parked for it.
type ModelHealth struct {
	state.ModelHealth
	Parked       int64     // rows of its rules parked
	OldestParked time.Time // zero when none
}

// OutageStatus is what status says of outages: each model the leader saw
// go down (or any with parked rows), and the parked rows per rule.
type OutageStatus struct {
	Models []ModelHealth       // by model
	Parked []state.ParkedCount // by rule
}

// healthState names a model's state for status.
func healthState(m ModelHealth) string {
	switch {
	case m.Down:
		return "down"
	case m.Since.IsZero():
		return "up" // never seen down: rows parked under another slot's outage, or by hand
	case m.Parked > 0:
		return "up, sending parked rows"
	}
	return "up"
}

// writeOutagesTable shows each model seen down: since when, why, the rows
// parked for it and the oldest; nothing when no model was ever down and no
// row is parked.
func writeOutagesTable(buf *bytes.Buffer, o OutageStatus) {
	if len(o.Models) == 0 {
		return
	}
	buf.WriteString("Model outages\n")
	t := newTable(buf)
	t.row("MODEL", "STATE", "SINCE", "PARKED", "OLDEST PARKED", "LAST OUTAGE", "CAUSE")
	for _, m := range o.Models {
		since, oldest, last := "-", "-", "-"
		if !m.Since.IsZero() {
			since = UTCTime(m.Since)
		}
		if !m.OldestParked.IsZero() {
			oldest = UTCTime(m.OldestParked)
		}
		if !m.Down && !m.DownSince.IsZero() {
			last = m.Since.Sub(m.DownSince).Round(time.Second).String() + ", " + strconv.Itoa(m.Probes) + " probes"
		}
		t.row(m.Model, healthState(m), since, strconv.FormatInt(m.Parked, 10), oldest, last, truncateText(m.Cause, 60))
	}
	t.flush()
	buf.WriteByte('\n')
}

// outageJSON is a model's circuit in status --format json.
type outageJSON struct {
	Model        string  `json:"model"`
	State        string  `json:"state"` // up, down
	Since        *string `json:"since"` // down: since when; up: since when again; null: never seen down
	DownSince    *string `json:"last_down_since"`
	Cause        *string `json:"cause"`
	Probes       int     `json:"probes"`
	ParkedRows   int64   `json:"parked_rows"`
	OldestParked *string `json:"oldest_parked"`
}

// parkedJSON is a rule's parked rows in status --format json.
type parkedJSON struct {
	Rule   string `json:"rule"`
	Model  string `json:"model"`
	Rows   int64  `json:"rows"`
	Oldest string `json:"oldest"`
}

// outagesJSON is the outages part of status --format json.
func outagesJSON(o OutageStatus) ([]outageJSON, []parkedJSON) {
	ts := func(t time.Time) *string {
		if t.IsZero() {
			return nil
		}
		s := t.UTC().Format(time.RFC3339)
		return &s
	}
	models := []outageJSON{}
	for _, m := range o.Models {
		j := outageJSON{Model: m.Model, State: "up", Since: ts(m.Since), DownSince: ts(m.DownSince), Probes: m.Probes,
			ParkedRows: m.Parked, OldestParked: ts(m.OldestParked)}
		if m.Down {
			j.State = "down"
		}
		if m.Cause != "" {
			c := m.Cause
			j.Cause = &c
		}
		models = append(models, j)
	}
	parked := []parkedJSON{}
	for _, c := range o.Parked {
		parked = append(parked, parkedJSON{Rule: c.Rule, Model: c.Model, Rows: c.Rows, Oldest: c.Oldest.UTC().Format(time.RFC3339)})
	}
	return models, parked
}
