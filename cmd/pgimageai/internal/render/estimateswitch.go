package render

import (
	"fmt"
)

// VersionChange is a rule's change from the version its live column holds
// to its current one.
type VersionChange struct {
	Kind              string // ChangeSwitch or ChangeInPlace
	From, FromModelID string // FromModelID "" when the version is not recorded
	To, ToModelID     string
	// SwitchState is the state of the rule's switch to To (aborted
	// included); "" when none is recorded.
	SwitchState string
}

// text says what the change costs: figures are the backfill's.
func (c *VersionChange) text(figures string) string {
	to, from := VersionText(c.To, c.ToModelID), VersionText(c.From, c.FromModelID)
	var s string
	if c.Kind == ChangeSwitch {
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

func (c *VersionChange) json(backfill estimateFigures) *versionChangeJSON {
	return &versionChangeJSON{Kind: c.Kind, FromVersion: c.From, FromModelID: OrNull(c.FromModelID), ToVersion: c.To,
		ToModelID: c.ToModelID, SwitchState: OrNull(c.SwitchState), estimateFigures: backfill}
}

// Change kinds of estimate's version_change.
const (
	ChangeSwitch  = "switch"   // computed on the side, switched in one transaction
	ChangeInPlace = "in_place" // rows overwritten as they are computed again
)
