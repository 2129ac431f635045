package render

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/state"
)

// TestOutagesTable: status says which model is down since when with how
// many rows parked, which came back and what its outage took; nothing when
// no model was ever down.
func TestOutagesTable(t *testing.T) {
	at := time.Date(2026, 12, 4, 20, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		o    OutageStatus
		want []string // lines that must appear
		none bool
	}{
		{name: "no outage", o: OutageStatus{}, none: true},
		{name: "down", o: OutageStatus{Models: []ModelHealth{{ModelHealth: state.ModelHealth{Model: "vision", Down: true, Since: at, Cause: "dial tcp: connection refused"},
			Parked: 42, OldestParked: at.Add(time.Second)}}},
			want: []string{"Model outages", "vision  down   2026-12-04T20:00:00Z  42      2026-12-04T20:00:01Z  -            dial tcp: connection refused"}},
		{name: "back, still sending", o: OutageStatus{Models: []ModelHealth{{ModelHealth: state.ModelHealth{Model: "vision", Since: at.Add(5 * time.Minute), DownSince: at, Probes: 9},
			Parked: 7, OldestParked: at}}},
			want: []string{"up, sending parked rows", "5m0s, 9 probes"}},
		{name: "back", o: OutageStatus{Models: []ModelHealth{{ModelHealth: state.ModelHealth{Model: "vision", Since: at.Add(time.Minute), DownSince: at, Probes: 3}}}},
			want: []string{"vision  up     2026-12-04T20:01:00Z  0       -              1m0s, 3 probes"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			writeOutagesTable(&buf, tc.o)
			got := buf.String()
			if tc.none && got != "" {
				t.Fatalf("wrote %q, want nothing", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("missing %q in\n%s", w, got)
				}
			}
			models, _ := outagesJSON(tc.o)
			if len(models) != len(tc.o.Models) {
				t.Fatalf("json: %d models, want %d", len(models), len(tc.o.Models))
			}
			for i, m := range models {
				if (m.State == "down") != tc.o.Models[i].Down || m.ParkedRows != tc.o.Models[i].Parked {
					t.Errorf("json %+v", m)
				}
			}
		})
	}
}
