package render

import (
	"fmt"

	"github.com/pgimageai/pgimageai/cmd/pgimageai/internal/estimate"
)

// text says what the change costs: figures are the backfill's.
func changeText(c *estimate.VersionChange, figures string) string {
	to, from := VersionText(c.To, c.ToModelID), VersionText(c.From, c.FromModelID)
	var s string
	if c.Kind == estimate.ChangeSwitch {
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
	estimate.Figures
}

func changeDocument(c *estimate.VersionChange, backfill estimate.Figures) *versionChangeJSON {
	return &versionChangeJSON{Kind: c.Kind, FromVersion: c.From, FromModelID: OrNull(c.FromModelID), ToVersion: c.To,
		ToModelID: c.ToModelID, SwitchState: OrNull(c.SwitchState), Figures: backfill}
}
