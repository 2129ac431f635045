package main

import (
	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/cmd/pgimageai/internal/render"
	"github.com/pgimageai/pgimageai/state"
)

// What estimate says when a rule's version (rules.VersionOf of its model,
// function and prompt) is not the one its live column holds: the backfill
// it estimates re-computes every row, on the side and switched in one
// transaction, or in place.

// versionChangeOf returns the change from the live version to v; nil when
// they are equal or no live version is recorded (the rule has not run
// since versions are recorded: its backfill is no change). A live version
// whose row of pgimageai.versions is missing changes in place, as the
// bridge does: it has no model row to run the live column with.
func versionChangeOf(rule state.RuleListing, v rules.Version, live state.LiveVersion) *render.VersionChange {
	if live.Version == "" || live.Version == v.ID {
		return nil
	}
	c := &render.VersionChange{Kind: render.ChangeInPlace, From: live.Version, FromModelID: live.ModelID, To: v.ID, ToModelID: v.ModelID}
	if rules.IsVersioned(rule.Function, rule.Switch) && live.ModelID != "" {
		c.Kind = render.ChangeSwitch
	}
	if live.SwitchTo == v.ID {
		c.SwitchState = live.SwitchState
	}
	return c
}
