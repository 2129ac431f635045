package render

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/replication"
)

func TestFailoverState(t *testing.T) {
	on := SlotStatus{Slot: replication.Slot{Name: "s", Failover: true}, Found: true}
	synced := SlotStatus{Slot: replication.Slot{Name: "s", Failover: true, Synced: true}, Found: true}
	off := SlotStatus{Slot: replication.Slot{Name: "s"}, Found: true}
	tests := []struct {
		name      string
		s         SlotStatus
		version   int
		want      string
		wantAdvic string
	}{
		{"version unknown", on, 0, "", ""},
		{"PostgreSQL 16", off, 160000, failoverUnsupported, "creates it again and backfills every rule"},
		{"PostgreSQL 16, no slot yet", SlotStatus{}, 160000, failoverUnsupported, "need PostgreSQL 17"},
		{"on", on, 170000, failoverOn, "synchronized_standby_slots"},
		{"a standby's copy", synced, 170000, failoverOn, "once the standby is promoted"},
		{"off", off, 170000, failoverOff, "turns failover on at its next start"},
		{"no slot yet", SlotStatus{}, 170000, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, advice := failover(tt.s, tt.version)
			if got != tt.want || !strings.Contains(advice, tt.wantAdvic) {
				t.Errorf("failover = %q, %q; want %q and advice with %q", got, advice, tt.want, tt.wantAdvic)
			}
		})
	}
}

func TestWriteGapsTable(t *testing.T) {
	var buf bytes.Buffer
	writeGapsTable(&buf, nil)
	if buf.Len() != 0 {
		t.Fatalf("no gaps wrote %q, want nothing", buf.String())
	}
	deleted := int64(3)
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	writeGapsTable(&buf, []slotGap{
		{DetectedAt: at, Cause: "slot_missing", Checkpoint: 0x30D7600, SlotLSN: 0x30FE768, Rules: []string{"a", "b"}},
		{DetectedAt: at.Add(-time.Hour), Cause: "slot_ahead", Checkpoint: 0x100, SlotLSN: 0x200, Rules: []string{"a"}, OrphansDeleted: &deleted, CleanedAt: &at},
	})
	for _, want := range []string{"Slot gaps", "slot_missing", "0/30D7600", "0/30FE768", "deleting (at the next start)", "slot_ahead", "3 deleted"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
}
