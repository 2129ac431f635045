package estimate

import (
	"reflect"
	"testing"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/state"
)

// TestVersionChangeOf: a rule whose version is not its live column's is a
// switch (AI_IMAGE_EMBED unless in_place, AI_IMAGE_COMPLETE when
// versioned) or an in-place change; equal versions, or none recorded, are
// no change.
func TestVersionChangeOf(t *testing.T) {
	embed := state.RuleListing{Name: "embed", Function: "AI_IMAGE_EMBED"}
	caption := state.RuleListing{Name: "caption", Function: "AI_IMAGE_COMPLETE"}
	with := func(r state.RuleListing, mode string) state.RuleListing { r.Switch = mode; return r }
	v := rules.Version{ID: "bbbbbbbb00000002", ModelID: "voyage-multimodal-3"}
	live := state.LiveVersion{Version: "aaaaaaaa00000001", ModelID: "text-embedding-3-small"}
	change := func(kind, switchState string) *VersionChange {
		return &VersionChange{Kind: kind, From: live.Version, FromModelID: live.ModelID, To: v.ID, ToModelID: v.ModelID, SwitchState: switchState}
	}
	tests := []struct {
		name string
		rule state.RuleListing
		live state.LiveVersion
		want *VersionChange
	}{
		{"same version", embed, state.LiveVersion{Version: v.ID}, nil},
		{"no version recorded", embed, state.LiveVersion{}, nil},
		{"embed", embed, live, change(ChangeSwitch, "")},
		{"embed versioned", with(embed, "versioned"), live, change(ChangeSwitch, "")},
		{"embed in place", with(embed, "in_place"), live, change(ChangeInPlace, "")},
		{"complete", caption, live, change(ChangeInPlace, "")},
		{"complete versioned", with(caption, "versioned"), live, change(ChangeSwitch, "")},
		{"the live version's row missing", embed, state.LiveVersion{Version: live.Version},
			&VersionChange{Kind: ChangeInPlace, From: live.Version, To: v.ID, ToModelID: v.ModelID}},
		{"its switch running", embed, state.LiveVersion{Version: live.Version, ModelID: live.ModelID, SwitchTo: v.ID, SwitchState: "computing"},
			change(ChangeSwitch, "computing")},
		{"a switch to another version", embed, state.LiveVersion{Version: live.Version, ModelID: live.ModelID, SwitchTo: "cccccccc00000003", SwitchState: "held"},
			change(ChangeSwitch, "")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ChangeOf(tc.rule, v, tc.live); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
