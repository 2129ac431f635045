package estimate

import (
	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/state"
)

// What estimate says when a rule's version (rules.VersionOf of its model,
// function and prompt) is not the one its live column holds: the backfill
// it estimates re-computes every row, on the side and switched in one
// transaction, or in place.

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

// Change kinds of estimate's version_change.
const (
	ChangeSwitch  = "switch"   // computed on the side, switched in one transaction
	ChangeInPlace = "in_place" // rows overwritten as they are computed again
)

// ChangeOf returns the change from the live version to v; nil when
// they are equal or no live version is recorded (the rule has not run
// since versions are recorded: its backfill is no change). A live version
// whose row of pgimageai.versions is missing changes in place, as the
// bridge does: it has no model row to run the live column with.
func ChangeOf(rule state.RuleListing, v rules.Version, live state.LiveVersion) *VersionChange {
	if live.Version == "" || live.Version == v.ID {
		return nil
	}
	c := &VersionChange{Kind: ChangeInPlace, From: live.Version, FromModelID: live.ModelID, To: v.ID, ToModelID: v.ModelID}
	if rules.IsVersioned(rule.Function, rule.Switch) && live.ModelID != "" {
		c.Kind = ChangeSwitch
	}
	if live.SwitchTo == v.ID {
		c.SwitchState = live.SwitchState
	}
	return c
}
