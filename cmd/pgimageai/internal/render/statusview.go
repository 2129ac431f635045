package render

import (
	"bytes"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/functions"
)

// WriteStatus renders r as format (table or json).
func WriteStatus(w io.Writer, r Status, format string) error {
	if format == FormatJSON {
		return JSON(w, statusDocument(r))
	}
	var buf bytes.Buffer
	writeSlotTable(&buf, r.Slot, r.Checkpoint)
	buf.WriteByte('\n')
	writeGapsTable(&buf, r.Gaps)
	writeRulesTable(&buf, r.Rules)
	buf.WriteByte('\n')
	if len(r.Groups) > 1 || len(r.Groups) == 1 && r.Groups[0].Group != "default" {
		writeGroupsTable(&buf, r.Groups)
		buf.WriteByte('\n')
	}
	if len(r.Versions) > 0 {
		writeResultVersions(&buf, r.Versions)
		buf.WriteByte('\n')
	}
	writeSwitchSection(&buf, r.Switches, r.History)
	writeLanesTable(&buf, r.Lanes, r.Slot)
	buf.WriteByte('\n')
	if len(r.Models) > 0 {
		writeModelsTable(&buf, r.Models)
		buf.WriteByte('\n')
	}
	writeOutagesTable(&buf, r.Outages)
	writeBackfillsTable(&buf, r.Backfills)
	buf.WriteByte('\n')
	if len(r.Batches) > 0 {
		writeBatchesTable(&buf, r.Batches)
		buf.WriteByte('\n')
	}
	writeErrorCountsTable(&buf, r.OpenErrors)
	buf.WriteByte('\n')
	writeErrorCapsTable(&buf, r.ErrorCaps)
	writeUsageTable(&buf, r.Usage)
	writeBudgetsTable(&buf, r.Budgets)
	_, err := w.Write(buf.Bytes())
	return err
}

// slotMissing is what status says about a slot that does not exist.
const slotMissing = "not created yet (run pgimageai run)"

func writeSlotTable(buf *bytes.Buffer, s SlotStatus, cp *checkpoint) {
	buf.WriteString("Slot\n")
	t := newTable(buf)
	t.row("name", s.Name)
	if s.Leader != nil {
		t.row("leader", s.Leader.String())
	}
	for _, h := range s.Squatters {
		t.row("lock key held by", fmt.Sprintf("pid %d, role %s, not the leader: ignored", h.PID, h.Role))
	}
	if !s.Found {
		t.row("state", slotMissing)
	} else {
		t.row("plugin", s.Plugin)
		t.row("database", s.Database)
		active := yesNo(s.Active)
		if s.ActivePID != 0 {
			active += fmt.Sprintf(" (pid %d)", s.ActivePID)
		}
		t.row("active", active)
		t.row("wal_status", s.WALStatus)
		if s.HasSafeWALSize {
			t.row("safe_wal_size", safeWALSize(s))
		}
		switch health, advice := s.health(); health {
		case slotInvalidated:
			t.row("invalidated", advice)
		case slotAtRisk:
			t.row("warning", advice)
		}
		t.row("confirmed_flush_lsn", s.ConfirmedFlushLSN.String())
		t.row("current_wal_lsn", s.CurrentLSN.String())
		t.row("lag", byteSize(s.Lag()))
	}
	if st, advice := failover(s, s.ServerVersion); st != "" {
		t.row("failover", failoverText(st, advice))
	}
	if cp != nil {
		t.row("checkpoint", fmt.Sprintf("%s (updated %s)", cp.LSN, UTCTime(cp.UpdatedAt)))
	} else {
		t.row("checkpoint", "none stored yet")
	}
	t.flush()
}

// Slot health as status reports it.
const (
	slotOK          = "ok"
	slotAtRisk      = "at_risk"     // wal_status unreserved: WAL it needs goes at the next checkpoint
	slotInvalidated = "invalidated" // it can never stream again
	slotAbsent      = "missing"     // table output only: JSON says "exists": false
)

// recoverAdvice is what status says to do about an invalidated slot.
const recoverAdvice = "the slot can no longer stream; stop pgimageai run if it still runs, then run pgimageai recover-slot and start pgimageai run again (every rule backfills)"

// health says whether the slot can stream, and what to do when it cannot or
// soon will not. See wal_status in
// https://www.postgresql.org/docs/current/view-pg-replication-slots.html
func (s SlotStatus) health() (health, advice string) {
	switch {
	case !s.Found:
		return slotAbsent, slotMissing
	case s.InvalidationReason != "":
		return slotInvalidated, s.InvalidationReason + ": " + recoverAdvice
	case s.Conflicting:
		return slotInvalidated, "conflict with recovery: " + recoverAdvice
	case s.WALStatus == "lost":
		return slotInvalidated, "WAL lost: " + recoverAdvice
	case s.WALStatus == "unreserved":
		return slotAtRisk, "wal_status unreserved: the slot is behind by more than max_slot_wal_keep_size and the next checkpoint removes WAL it needs, invalidating it; let pgimageai run catch up (is it running?) or raise max_slot_wal_keep_size"
	}
	return slotOK, ""
}

func safeWALSize(s SlotStatus) string {
	switch {
	case s.SafeWALSize != nil && *s.SafeWALSize >= 0:
		return byteSize(uint64(*s.SafeWALSize))
	case s.SafeWALSize != nil:
		return fmt.Sprintf("%d bytes (the slot is about to lose WAL it needs)", *s.SafeWALSize)
	case s.WALStatus == "lost":
		return "none (WAL lost)"
	}
	return "unlimited (max_slot_wal_keep_size = -1)"
}

func writeRulesTable(buf *bytes.Buffer, rules []ruleStatus) {
	if len(rules) == 0 {
		buf.WriteString("Rules: none (insert rows into pgimageai.rules)\n")
		return
	}
	buf.WriteString("Rules\n")
	t := newTable(buf)
	t.row("NAME", "ENABLED", "FUNCTION", "MODEL", "SOURCE", "", "TARGET", "STATUS")
	for _, r := range rules {
		state := ruleState(r)
		if state == ruleInvalid {
			state += ": " + r.Invalid
		}
		t.row(r.Name, yesNo(r.Enabled), r.Function, r.Model, r.SourceTable+"."+catalog.QuoteIdent(r.ImageColumn),
			"→", r.TargetTable+"."+catalog.QuoteIdent(r.TargetColumn), state)
	}
	t.flush()
}

func writeGroupsTable(buf *bytes.Buffer, groups []GroupStatus) {
	buf.WriteString("Rule groups (pgimageai run --group NAME; each with its own slot)\n")
	t := newTable(buf)
	t.row("GROUP", "RULES", "ENABLED", "SLOT", "STATE", "LAG")
	for _, g := range groups {
		state, lag := "not created yet", "-"
		if g.Found {
			state, lag = "inactive", byteSize(g.Lag)
			if g.Active {
				state = "streaming"
			}
		}
		t.row(g.Group, strconv.FormatInt(g.Rules, 10), strconv.FormatInt(g.Enabled, 10), g.Slot, state, lag)
	}
	t.flush()
}

func writeLanesTable(buf *bytes.Buffer, lanes []laneStatus, s SlotStatus) {
	if len(lanes) == 0 {
		buf.WriteString("Lanes: none\n")
		return
	}
	buf.WriteString("Lanes (one per target table)\n")
	t := newTable(buf)
	t.row("LANE", "APPLIED", "LAG", "LAST COMMIT", "DELAY", "PENDING", "OLDEST PENDING", "UPDATED")
	for _, l := range lanes {
		commit, delay := "-", "-"
		if l.CommitTime != nil {
			commit = UTCTime(*l.CommitTime)
		}
		if l.Delay != nil && laneLag(l, s) > 0 {
			delay = l.Delay.Round(time.Second).String()
		} else if l.Delay != nil {
			delay = "0s"
		}
		pending, oldest := "-", "-" // not known: no leader stored them lately
		if l.Pending != nil {
			pending = strconv.FormatInt(*l.Pending, 10)
		}
		if l.OldestPending != nil {
			oldest = max(*l.OldestPending, 0).Round(time.Second).String()
		}
		t.row(l.Lane, fmt.Sprintf("%s#%d", l.LSN, l.Ord), byteSize(laneLag(l, s)), commit, delay, pending, oldest, UTCTime(l.UpdatedAt))
	}
	t.flush()
}

// writeModelsTable shows each model's pacing: calls in flight of the adaptive
// limit and its ceiling and why the limit is there, the pace and what set it, 429s in the last minute
// and the time requests waited; pacing older than paceStale is marked.
func writeModelsTable(buf *bytes.Buffer, models []modelPace) {
	buf.WriteString("Model pacing\n")
	t := newTable(buf)
	t.row("MODEL", "IN FLIGHT", "LIMIT", "PACE", "429s/MIN", "WAITED", "STATE", "UPDATED")
	for _, m := range models {
		st := "ok"
		switch {
		case m.Age > paceStale:
			st = "stale (no leader storing it)"
		case m.RateLimited:
			st = "rate-limited"
		}
		limit := fmt.Sprintf("%d of %d", m.Limit, m.Ceil)
		if m.LimitBy != "" {
			limit += ", " + m.LimitBy
		}
		t.row(m.Model, strconv.Itoa(m.InFlight), limit, m.Pace,
			strconv.Itoa(m.Limited1m), m.Waited.Round(time.Second).String(), st, UTCTime(m.UpdatedAt))
	}
	t.flush()
}

func writeBackfillsTable(buf *bytes.Buffer, backfills []backfill) {
	if len(backfills) == 0 {
		buf.WriteString("Backfills: none\n")
		return
	}
	buf.WriteString("Backfills\n")
	t := newTable(buf)
	t.row("RULE", "STATE", "ROWS", "UPDATED")
	for _, b := range backfills {
		rows := strconv.FormatInt(b.RowsDone, 10)
		if b.RowsTotal != nil {
			rows += "/" + strconv.FormatInt(*b.RowsTotal, 10)
		}
		t.row(b.Rule, b.State, rows, UTCTime(b.UpdatedAt))
	}
	t.flush()
}

// writeBatchesTable shows the batches of backfills through a batch API:
// the provider's status and what the bridge did with it, the requests
// answered and failed of those sent, and how long ago it was sent.
func writeBatchesTable(buf *bytes.Buffer, batches []batchRow) {
	buf.WriteString("Batches (backfills through a batch API)\n")
	t := newTable(buf)
	t.row("RULE", "SEQ", "BATCH", "STATUS", "REQUESTS", "AGE")
	for _, b := range batches {
		id := b.BatchID
		if id == "" {
			id = "-"
		}
		t.row(b.Rule, strconv.Itoa(b.Seq), id, batchState(b),
			fmt.Sprintf("%d done, %d failed of %d", b.Completed, b.Failed, b.Requests), b.Age.Round(time.Second).String())
	}
	t.flush()
}

// batchState is the provider's status of a batch and the bridge's step.
func batchState(b batchRow) string {
	switch {
	case b.Status == "refused":
		return "refused (its rows get synchronous calls)"
	case b.Requests == 0:
		return "nothing to ask"
	case b.Applied:
		return b.Status + ", applied"
	case b.Downloaded:
		return b.Status + ", applying"
	}
	return b.Status
}

// reasonCount is the number of open errors with one reason.
type reasonCount struct {
	Reason functions.Reason
	Count  int64
}

// byReason sums counts per reason, most frequent first.
func byReason(counts []errorCount) (sums []reasonCount, total int64) {
	m := map[functions.Reason]int64{}
	for _, c := range counts {
		m[c.Reason] += c.Count
		total += c.Count
	}
	for r, n := range m {
		sums = append(sums, reasonCount{r, n})
	}
	sort.Slice(sums, func(i, j int) bool {
		if sums[i].Count != sums[j].Count {
			return sums[i].Count > sums[j].Count
		}
		return sums[i].Reason < sums[j].Reason
	})
	return sums, total
}

func writeErrorCountsTable(buf *bytes.Buffer, counts []errorCount) {
	sums, total := byReason(counts)
	if total == 0 {
		buf.WriteString("Open errors: none\n")
		return
	}
	fmt.Fprintf(buf, "Open errors: %d (list them with pgimageai errors)\n", total)
	t := newTable(buf)
	t.row("REASON", "COUNT")
	for _, s := range sums {
		t.row(string(s.Reason), strconv.FormatInt(s.Count, 10))
	}
	t.flush()
	buf.WriteByte('\n')
	t = newTable(buf)
	t.row("RULE", "REASON", "COUNT")
	for _, c := range counts {
		t.row(c.Rule, string(c.Reason), strconv.FormatInt(c.Count, 10))
	}
	t.flush()
}
