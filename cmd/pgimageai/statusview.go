package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/functions"
)

// writeStatus renders r as format (table or json).
func writeStatus(w io.Writer, r statusReport, format string) error {
	if format == formatJSON {
		return writeJSON(w, statusDocument(r))
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
	writeLanesTable(&buf, r.Lanes, r.Slot)
	buf.WriteByte('\n')
	if len(r.Models) > 0 {
		writeModelsTable(&buf, r.Models)
		buf.WriteByte('\n')
	}
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

func writeSlotTable(buf *bytes.Buffer, s slotStatus, cp *checkpoint) {
	buf.WriteString("Slot\n")
	t := newTable(buf)
	t.row("name", s.Name)
	if s.Leader != nil {
		t.row("leader", s.Leader.String())
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
		t.row("checkpoint", fmt.Sprintf("%s (updated %s)", cp.LSN, utcTime(cp.UpdatedAt)))
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
func (s slotStatus) health() (health, advice string) {
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

func safeWALSize(s slotStatus) string {
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

func writeGroupsTable(buf *bytes.Buffer, groups []groupStatus) {
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

func writeLanesTable(buf *bytes.Buffer, lanes []laneStatus, s slotStatus) {
	if len(lanes) == 0 {
		buf.WriteString("Lanes: none\n")
		return
	}
	buf.WriteString("Lanes (one per target table)\n")
	t := newTable(buf)
	t.row("LANE", "APPLIED", "LAG", "LAST COMMIT", "DELAY", "UPDATED")
	for _, l := range lanes {
		commit, delay := "-", "-"
		if l.CommitTime != nil {
			commit = utcTime(*l.CommitTime)
		}
		if l.Delay != nil && laneLag(l, s) > 0 {
			delay = l.Delay.Round(time.Second).String()
		} else if l.Delay != nil {
			delay = "0s"
		}
		t.row(l.Lane, fmt.Sprintf("%s#%d", l.LSN, l.Ord), byteSize(laneLag(l, s)), commit, delay, utcTime(l.UpdatedAt))
	}
	t.flush()
}

// writeModelsTable shows each model's pacing: calls in flight of the adaptive
// limit and its ceiling, the pace and what set it, 429s in the last minute
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
		t.row(m.Model, strconv.Itoa(m.InFlight), fmt.Sprintf("%d of %d", m.Limit, m.Ceil), m.Pace,
			strconv.Itoa(m.Limited1m), m.Waited.Round(time.Second).String(), st, utcTime(m.UpdatedAt))
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
		t.row(b.Rule, b.State, rows, utcTime(b.UpdatedAt))
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

// The JSON document of `pgimageai status --format json`. LSNs are in
// PostgreSQL's text form (castable to pg_lsn); times are RFC 3339 in UTC.
type (
	statusJSON struct {
		Slot        slotJSON        `json:"slot"`
		Checkpoint  *checkpointJSON `json:"checkpoint"` // null: none stored
		Rules       []ruleJSON      `json:"rules"`
		Groups      []groupJSON     `json:"groups"`
		Lanes       []laneJSON      `json:"lanes"`
		Backfills   []backfillJSON  `json:"backfills"`
		Batches     []batchJSON     `json:"batches"`
		OpenErrors  openErrorsJSON  `json:"open_errors"`
		NotRecorded []errorCapJSON  `json:"errors_not_recorded"`
		Usage       []usageJSON     `json:"usage"`
		Budgets     []budgetJSON    `json:"budgets"`
		Models      []modelJSON     `json:"models"`
		Gaps        []gapJSON       `json:"slot_gaps"`
	}
	modelJSON struct {
		Model         string  `json:"model"`
		InFlight      int     `json:"in_flight"`
		Concurrency   int     `json:"concurrency"`
		Ceiling       int     `json:"max_concurrency"`
		Pace          string  `json:"pace"`
		RateLimited1m int     `json:"rate_limited_last_minute"`
		Answered1m    int     `json:"answered_last_minute"`
		WaitedSeconds float64 `json:"waited_seconds"`
		RateLimited   bool    `json:"rate_limited"`
		Stale         bool    `json:"stale"`
		UpdatedAt     string  `json:"updated_at"`
	}
	slotJSON struct {
		Name               string `json:"name"`
		Exists             bool   `json:"exists"`
		Plugin             string `json:"plugin,omitempty"`
		Database           string `json:"database,omitempty"`
		Active             *bool  `json:"active,omitempty"`
		ActivePID          *int32 `json:"active_pid,omitempty"`
		WALStatus          string `json:"wal_status,omitempty"`
		InvalidationReason string `json:"invalidation_reason,omitempty"`
		// Health is ok, at_risk (wal_status unreserved) or invalidated, and
		// absent with the slot; Advice says what to do unless ok.
		Health string `json:"health,omitempty"`
		Advice string `json:"advice,omitempty"`
		// SafeWALSize is absent where the server lacks it, null when no
		// limit applies (max_slot_wal_keep_size = -1) or the WAL is lost
		// (health invalidated).
		SafeWALSize       json.RawMessage `json:"safe_wal_size,omitempty"`
		ConfirmedFlushLSN string          `json:"confirmed_flush_lsn,omitempty"`
		CurrentWALLSN     string          `json:"current_wal_lsn,omitempty"`
		LagBytes          *uint64         `json:"lag_bytes,omitempty"`
		// Leader is the pgimageai run holding the slot's leader lock;
		// absent when none does.
		Leader *leaderJSON `json:"leader,omitempty"`
		// Failover is on, off or unsupported (before PostgreSQL 17);
		// FailoverAdvice says what it means.
		Failover       string `json:"failover,omitempty"`
		FailoverAdvice string `json:"failover_advice,omitempty"`
	}
	leaderJSON struct {
		PID         int32  `json:"pid"`
		Application string `json:"application"`
		Client      string `json:"client"`
	}
	checkpointJSON struct {
		LSN       string    `json:"lsn"`
		UpdatedAt time.Time `json:"updated_at"`
	}
	ruleJSON struct {
		Name         string  `json:"name"`
		Enabled      bool    `json:"enabled"`
		Function     string  `json:"function"`
		Model        string  `json:"model"`
		SourceTable  string  `json:"source_table"`
		ImageColumn  string  `json:"image_column"`
		TargetTable  string  `json:"target_table"`
		TargetColumn string  `json:"target_column"`
		Status       string  `json:"status"`         // valid, invalid or disabled
		Reason       *string `json:"invalid_reason"` // null unless invalid
	}
	groupJSON struct {
		Group    string  `json:"group"`
		Rules    int64   `json:"rules"`
		Enabled  int64   `json:"enabled"`
		Slot     string  `json:"slot"`
		Exists   bool    `json:"slot_exists"`
		Active   bool    `json:"active"`
		LagBytes *uint64 `json:"lag_bytes"` // null without the slot
	}
	budgetJSON struct {
		Model     string `json:"model"`
		Day       string `json:"day"` // YYYY-MM-DD, UTC
		Calls     int64  `json:"calls"`
		MaxCalls  *int64 `json:"max_calls_per_day"` // null: no cap
		Tokens    int64  `json:"tokens"`
		MaxTokens *int64 `json:"max_tokens_per_day"` // null: no cap
	}
	laneJSON struct {
		Lane       string     `json:"lane"`
		LSN        string     `json:"lsn"`
		Ord        int64      `json:"ord"`
		CommitTime *time.Time `json:"commit_time"`
		LagBytes   uint64     `json:"lag_bytes"`
		// DelaySeconds is the target's now() minus CommitTime while the
		// lane lags, 0 when it does not, null before its first write.
		DelaySeconds *float64  `json:"delay_seconds"`
		UpdatedAt    time.Time `json:"updated_at"`
	}
	backfillJSON struct {
		Rule      string    `json:"rule"`
		State     string    `json:"state"`
		RowsDone  int64     `json:"rows_done"`
		RowsTotal *int64    `json:"rows_total"`
		UpdatedAt time.Time `json:"updated_at"`
	}
	batchJSON struct {
		Rule    string  `json:"rule"`
		Seq     int     `json:"seq"`
		BatchID *string `json:"batch_id"` // null: not created
		// Status is the provider's (validating, in_progress, completed,
		// expired, …), or uploaded, refused, empty (nothing to ask).
		Status     string    `json:"status"`
		Requests   int       `json:"requests"`
		Completed  int       `json:"completed"`
		Failed     int       `json:"failed"`
		Downloaded bool      `json:"answers_stored"`
		Applied    bool      `json:"applied"`
		CreatedAt  time.Time `json:"created_at"`
		AgeSeconds float64   `json:"age_seconds"`
	}
	openErrorsJSON struct {
		Total    int64                                 `json:"total"`
		ByReason map[functions.Reason]int64            `json:"by_reason"`
		ByRule   map[string]map[functions.Reason]int64 `json:"by_rule"`
	}
)

func statusDocument(r statusReport) statusJSON {
	doc := statusJSON{
		Slot:        slotJSON{Name: r.Slot.Name, Exists: r.Slot.Found},
		Rules:       []ruleJSON{},
		Groups:      []groupJSON{},
		Lanes:       []laneJSON{},
		Backfills:   []backfillJSON{},
		Usage:       usageDocument(r.Usage),
		Gaps:        gapsDocument(r.Gaps),
		NotRecorded: errorCapsDocument(r.ErrorCaps),
		OpenErrors: openErrorsJSON{
			ByReason: map[functions.Reason]int64{},
			ByRule:   map[string]map[functions.Reason]int64{},
		},
	}
	doc.Slot.Failover, doc.Slot.FailoverAdvice = failover(r.Slot, r.Slot.ServerVersion)
	if l := r.Slot.Leader; l != nil {
		doc.Slot.Leader = &leaderJSON{PID: l.PID, Application: l.Application, Client: l.Client}
	}
	if s := r.Slot; s.Found {
		doc.Slot.Health, doc.Slot.Advice = s.health()
		lag := s.Lag()
		doc.Slot.Plugin, doc.Slot.Database, doc.Slot.Active, doc.Slot.WALStatus = s.Plugin, s.Database, &s.Active, s.WALStatus
		doc.Slot.InvalidationReason = s.InvalidationReason
		if s.ActivePID != 0 {
			doc.Slot.ActivePID = &s.ActivePID
		}
		if s.HasSafeWALSize {
			doc.Slot.SafeWALSize = json.RawMessage("null")
			if s.SafeWALSize != nil {
				doc.Slot.SafeWALSize = strconv.AppendInt(nil, *s.SafeWALSize, 10)
			}
		}
		doc.Slot.ConfirmedFlushLSN, doc.Slot.CurrentWALLSN = s.ConfirmedFlushLSN.String(), s.CurrentLSN.String()
		doc.Slot.LagBytes = &lag
	}
	if cp := r.Checkpoint; cp != nil {
		doc.Checkpoint = &checkpointJSON{LSN: cp.LSN.String(), UpdatedAt: cp.UpdatedAt.UTC()}
	}
	for _, rule := range r.Rules {
		j := ruleJSON{
			Name: rule.Name, Enabled: rule.Enabled, Function: rule.Function, Model: rule.Model,
			SourceTable: rule.SourceTable, ImageColumn: rule.ImageColumn,
			TargetTable: rule.TargetTable, TargetColumn: rule.TargetColumn, Status: ruleState(rule),
		}
		if j.Status == ruleInvalid {
			j.Reason = &rule.Invalid
		}
		doc.Rules = append(doc.Rules, j)
	}
	doc.Models = []modelJSON{}
	for _, m := range r.Models {
		doc.Models = append(doc.Models, modelJSON{Model: m.Model, InFlight: m.InFlight, Concurrency: m.Limit, Ceiling: m.Ceil,
			Pace: m.Pace, RateLimited1m: m.Limited1m, Answered1m: m.Answered1m, WaitedSeconds: m.Waited.Seconds(),
			RateLimited: m.RateLimited, Stale: m.Age > paceStale, UpdatedAt: m.UpdatedAt.UTC().Format(time.RFC3339)})
	}
	doc.Budgets = []budgetJSON{}
	for _, b := range r.Budgets {
		j := budgetJSON{Model: b.Model, Day: b.Day.Format(time.DateOnly), Calls: b.Calls, Tokens: b.Tokens}
		if b.MaxCalls > 0 {
			j.MaxCalls = &b.MaxCalls
		}
		if b.MaxTokens > 0 {
			j.MaxTokens = &b.MaxTokens
		}
		doc.Budgets = append(doc.Budgets, j)
	}
	for _, g := range r.Groups {
		j := groupJSON{Group: g.Group, Rules: g.Rules, Enabled: g.Enabled, Slot: g.Slot, Exists: g.Found, Active: g.Active}
		if g.Found {
			lag := g.Lag
			j.LagBytes = &lag
		}
		doc.Groups = append(doc.Groups, j)
	}
	for _, l := range r.Lanes {
		j := laneJSON{Lane: l.Lane, LSN: l.LSN.String(), Ord: l.Ord, LagBytes: laneLag(l, r.Slot), UpdatedAt: l.UpdatedAt.UTC()}
		if l.CommitTime != nil {
			ct := l.CommitTime.UTC()
			j.CommitTime = &ct
		}
		if l.Delay != nil {
			d := 0.0
			if j.LagBytes > 0 {
				d = l.Delay.Seconds()
			}
			j.DelaySeconds = &d
		}
		doc.Lanes = append(doc.Lanes, j)
	}
	for _, b := range r.Backfills {
		doc.Backfills = append(doc.Backfills, backfillJSON{
			Rule: b.Rule, State: b.State, RowsDone: b.RowsDone, RowsTotal: b.RowsTotal, UpdatedAt: b.UpdatedAt.UTC(),
		})
	}
	doc.Batches = []batchJSON{}
	for _, b := range r.Batches {
		j := batchJSON{Rule: b.Rule, Seq: b.Seq, Status: b.Status, Requests: b.Requests, Completed: b.Completed, Failed: b.Failed,
			Downloaded: b.Downloaded, Applied: b.Applied, CreatedAt: b.Created.UTC(), AgeSeconds: b.Age.Round(time.Second).Seconds()}
		if b.BatchID != "" {
			j.BatchID = &b.BatchID
		}
		doc.Batches = append(doc.Batches, j)
	}
	for _, c := range r.OpenErrors {
		doc.OpenErrors.Total += c.Count
		doc.OpenErrors.ByReason[c.Reason] += c.Count
		if doc.OpenErrors.ByRule[c.Rule] == nil {
			doc.OpenErrors.ByRule[c.Rule] = map[functions.Reason]int64{}
		}
		doc.OpenErrors.ByRule[c.Rule][c.Reason] += c.Count
	}
	return doc
}
