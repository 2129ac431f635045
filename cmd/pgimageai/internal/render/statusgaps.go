package render

import (
	"bytes"
	"fmt"
	"strconv"
	"time"

	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/state"
)

// What status says about failover and about the changes a slot skipped.

// slotGap is a row of pgimageai.slot_gaps.
type slotGap = state.Gap

// Failover states of a slot as status reports them.
const (
	failoverOn          = "on"
	failoverOff         = "off"
	failoverUnsupported = "unsupported"
)

// failover says whether the slot survives a promotion of a standby, and
// what a failover costs otherwise. serverVersion is the source's
// server_version_num; 0 when not known, and then status says nothing.
func failover(s SlotStatus, serverVersion int) (state, advice string) {
	switch {
	case serverVersion == 0:
		return "", "" // not known
	case serverVersion < replication.FailoverVersion:
		return failoverUnsupported, "failover slots need PostgreSQL 17: after a failover the new primary has no copy of the slot, and pgimageai run " +
			"creates it again and backfills every rule from the rows as they are (stored results are not paid again; the results of rows deleted meanwhile are deleted)"
	case !s.Found:
		return "", ""
	case s.Failover:
		advice := "standbys with sync_replication_slots = on keep a copy; list their physical slots in the primary's synchronized_standby_slots"
		if s.Synced {
			advice = "this is a standby's synchronised copy: it streams once the standby is promoted"
		}
		return failoverOn, advice
	}
	return failoverOff, "pgimageai run turns failover on at its next start"
}

func writeGapsTable(buf *bytes.Buffer, gaps []slotGap) {
	if len(gaps) == 0 {
		return
	}
	buf.WriteString("Slot gaps (the slot skipped changes; every rule backfilled from the rows as they were)\n")
	t := newTable(buf)
	t.row("DETECTED", "CAUSE", "CHECKPOINT", "SLOT AT", "RULES", "RESULTS OF DELETED ROWS")
	for _, g := range gaps {
		cleaned := "deleting (at the next start)"
		if g.CleanedAt != nil && g.OrphansDeleted != nil {
			cleaned = strconv.FormatInt(*g.OrphansDeleted, 10) + " deleted"
		}
		t.row(UTCTime(g.DetectedAt), g.Cause, g.Checkpoint.String(), g.SlotLSN.String(), strconv.Itoa(len(g.Rules)), cleaned)
	}
	t.flush()
	buf.WriteByte('\n')
}

// gapJSON is a gap in `pgimageai status --format json`.
type gapJSON struct {
	DetectedAt     time.Time  `json:"detected_at"`
	Cause          string     `json:"cause"` // slot_missing or slot_ahead
	Checkpoint     string     `json:"checkpoint"`
	SlotLSN        string     `json:"slot_lsn"`
	Rules          []string   `json:"rules"`
	OrphansDeleted *int64     `json:"orphans_deleted"` // null until cleaned
	CleanedAt      *time.Time `json:"cleaned_at"`
}

func gapsDocument(gaps []slotGap) []gapJSON {
	out := []gapJSON{}
	for _, g := range gaps {
		j := gapJSON{DetectedAt: g.DetectedAt.UTC(), Cause: g.Cause, Checkpoint: g.Checkpoint.String(), SlotLSN: g.SlotLSN.String(),
			Rules: g.Rules, OrphansDeleted: g.OrphansDeleted}
		if g.CleanedAt != nil {
			c := g.CleanedAt.UTC()
			j.CleanedAt = &c
		}
		out = append(out, j)
	}
	return out
}

// failoverText is the slot table's failover row.
func failoverText(state, advice string) string {
	if advice == "" {
		return state
	}
	return fmt.Sprintf("%s: %s", state, advice)
}
