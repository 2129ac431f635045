package main

import (
	"fmt"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/cmd/pgimageai/internal/render"
	"github.com/pgimageai/pgimageai/state"
)

// What estimate says when a rule's version (rules.VersionOf of its model,
// function and prompt) is not the one its live column holds: the backfill
// it estimates re-computes every row, on the side and switched in one
// transaction, or in place.

// Change kinds of estimate's version_change.
const (
	changeSwitch  = "switch"   // computed on the side, switched in one transaction
	changeInPlace = "in_place" // rows overwritten as they are computed again
)

// versionChange is a rule's change from the version its live column holds
// to its current one.
type versionChange struct {
	Kind              string // changeSwitch or changeInPlace
	From, FromModelID string // FromModelID "" when the version is not recorded
	To, ToModelID     string
	// SwitchState is the state of the rule's switch to To (aborted
	// included); "" when none is recorded.
	SwitchState string
}

// versionChangeOf returns the change from the live version to v; nil when
// they are equal or no live version is recorded (the rule has not run
// since versions are recorded: its backfill is no change). A live version
// whose row of pgimageai.versions is missing changes in place, as the
// bridge does: it has no model row to run the live column with.
func versionChangeOf(rule state.RuleListing, v rules.Version, live state.LiveVersion) *versionChange {
	if live.Version == "" || live.Version == v.ID {
		return nil
	}
	c := &versionChange{Kind: changeInPlace, From: live.Version, FromModelID: live.ModelID, To: v.ID, ToModelID: v.ModelID}
	if rules.IsVersioned(rule.Function, rule.Switch) && live.ModelID != "" {
		c.Kind = changeSwitch
	}
	if live.SwitchTo == v.ID {
		c.SwitchState = live.SwitchState
	}
	return c
}

// text says what the change costs: figures are the backfill's.
func (c *versionChange) text(figures string) string {
	to, from := render.VersionText(c.To, c.ToModelID), render.VersionText(c.From, c.FromModelID)
	var s string
	if c.Kind == changeSwitch {
		s = fmt.Sprintf("Switch: changing to version %s re-computes every row on the side, so the backfill above is its cost: %s; the live column keeps %s until one transaction switches it",
			to, figures, from)
	} else {
		s = fmt.Sprintf("Change: changing to version %s re-computes every row in place, so the backfill above is its cost: %s; rows keep results of %s until they are computed again",
			to, figures, from)
	}
	switch c.SwitchState {
	case "":
	case "aborted":
		s += "; its switch was aborted: the bridge does not start it again until the rule's version changes again"
	default:
		s += "; its switch is running (" + c.SwitchState + "): pgimageai status shows how far"
	}
	return s + "\n"
}

// versionChangeJSON is estimate's version_change: the change and what it
// costs, the backfill's figures.
type versionChangeJSON struct {
	Kind        string  `json:"kind"` // switch or in_place
	FromVersion string  `json:"from_version"`
	FromModelID *string `json:"from_model_id"` // null: the version is not recorded
	ToVersion   string  `json:"to_version"`
	ToModelID   string  `json:"to_model_id"`
	SwitchState *string `json:"switch_state"` // of the switch to it, aborted included; null: none
	estimateFigures
}

func (c *versionChange) json(backfill estimateFigures) *versionChangeJSON {
	return &versionChangeJSON{Kind: c.Kind, FromVersion: c.From, FromModelID: render.OrNull(c.FromModelID), ToVersion: c.To,
		ToModelID: c.ToModelID, SwitchState: render.OrNull(c.SwitchState), estimateFigures: backfill}
}
