package bridge

import (
	"testing"

	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/state"
)

func TestGapCause(t *testing.T) {
	healthy := replication.Slot{Name: "s", Type: "logical", Plugin: replication.Plugin, Database: "db", ConfirmedFlushLSN: 0x3000}
	lost := healthy
	lost.WALStatus = "lost"
	bound := state.Checkpoint{LSN: 0x2000, BoundsSlot: true}
	old := state.Checkpoint{LSN: 0x2000} // stored by a bridge that confirmed first
	tests := []struct {
		name      string
		cp        state.Checkpoint
		found     bool
		slot      replication.Slot
		slotFound bool
		want      string
	}{
		{"first start, no slot", state.Checkpoint{}, false, replication.Slot{}, false, ""},
		{"first start, slot made by hand", state.Checkpoint{}, false, healthy, true, ""},
		{"slot dropped after a checkpoint", bound, true, replication.Slot{}, false, state.GapSlotMissing},
		{"slot dropped, checkpoint of an older bridge", old, true, replication.Slot{}, false, state.GapSlotMissing},
		{"slot ahead of a bounding checkpoint", bound, true, healthy, true, state.GapSlotAhead},
		{"slot ahead of an older bridge's checkpoint: cannot tell", old, true, healthy, true, ""},
		{"slot at the checkpoint", state.Checkpoint{LSN: 0x3000, BoundsSlot: true}, true, healthy, true, ""},
		{"slot behind the checkpoint (confirmed late)", state.Checkpoint{LSN: 0x4000, BoundsSlot: true}, true, healthy, true, ""},
		{"slot lost: recover-slot's case, not a gap", bound, true, lost, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := gapCause(tt.cp, tt.found, tt.slot, tt.slotFound, "db"); got != tt.want {
				t.Errorf("gapCause = %q, want %q", got, tt.want)
			}
		})
	}
}
