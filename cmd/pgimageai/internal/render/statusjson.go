package render

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/pgimageai/pgimageai/functions"
)

// The JSON document of `pgimageai status --format json`. LSNs are in
// PostgreSQL's text form (castable to pg_lsn); times are RFC 3339 in UTC.
type (
	// statusJSON is the document: where the stream is, the work and its
	// failures, the models, the slot's gaps and the versions. The
	// embedded parts flatten into one object, in this order.
	statusJSON struct {
		statusStreamJSON
		statusWorkJSON
		statusModelsJSON
		Gaps []gapJSON `json:"slot_gaps"`
		statusVersionsJSON
	}
	// statusStreamJSON is where the stream is: the slot, the checkpoint,
	// the rules and their groups, and the lanes.
	statusStreamJSON struct {
		Slot       slotJSON        `json:"slot"`
		Checkpoint *checkpointJSON `json:"checkpoint"` // null: none stored
		Rules      []ruleJSON      `json:"rules"`
		Groups     []groupJSON     `json:"groups"`
		Lanes      []laneJSON      `json:"lanes"`
	}
	// statusWorkJSON is the backfills, their batches and the failures.
	statusWorkJSON struct {
		Backfills   []backfillJSON `json:"backfills"`
		Batches     []batchJSON    `json:"batches"`
		OpenErrors  openErrorsJSON `json:"open_errors"`
		NotRecorded []errorCapJSON `json:"errors_not_recorded"`
	}
	// statusModelsJSON is what the models spent, their pace and outages.
	statusModelsJSON struct {
		Usage   []usageJSON  `json:"usage"`
		Budgets []budgetJSON `json:"budgets"`
		Models  []modelJSON  `json:"models"`
		Outages []outageJSON `json:"model_outages"`
		Parked  []parkedJSON `json:"parked"`
	}
	// statusVersionsJSON is the stored results by rule and version, the
	// running switches and the last that ended.
	statusVersionsJSON struct {
		Versions []resultVersionJSON `json:"result_versions"`
		Switches []switchJSON        `json:"switches"`
		History  []switchEndJSON     `json:"switch_history"`
	}
	modelJSON struct {
		Model         string  `json:"model"`
		InFlight      int     `json:"in_flight"`
		Concurrency   int     `json:"concurrency"`
		ConcurrencyBy string  `json:"concurrency_by"`
		Ceiling       int     `json:"max_concurrency"`
		Pace          string  `json:"pace"`
		RateLimited1m int     `json:"rate_limited_last_minute"`
		Answered1m    int     `json:"answered_last_minute"`
		WaitedSeconds float64 `json:"waited_seconds"`
		RateLimited   bool    `json:"rate_limited"`
		Stale         bool    `json:"stale"`
		UpdatedAt     string  `json:"updated_at"`
	}
	// slotJSON is the replication slot: its name, what the server says
	// of it, its health, its positions, who leads it and its failover.
	// The embedded parts flatten into one object, in this order.
	slotJSON struct {
		Name   string `json:"name"`
		Exists bool   `json:"exists"`
		slotStateJSON
		slotHealthJSON
		slotPositionJSON
		slotLeaderJSON
		slotFailoverJSON
	}
	// slotStateJSON is pg_replication_slots' row of the slot.
	slotStateJSON struct {
		Plugin             string `json:"plugin,omitempty"`
		Database           string `json:"database,omitempty"`
		Active             *bool  `json:"active,omitempty"`
		ActivePID          *int32 `json:"active_pid,omitempty"`
		WALStatus          string `json:"wal_status,omitempty"`
		InvalidationReason string `json:"invalidation_reason,omitempty"`
	}
	slotHealthJSON struct {
		// Health is ok, at_risk (wal_status unreserved) or invalidated, and
		// absent with the slot; Advice says what to do unless ok.
		Health string `json:"health,omitempty"`
		Advice string `json:"advice,omitempty"`
		// SafeWALSize is absent where the server lacks it, null when no
		// limit applies (max_slot_wal_keep_size = -1) or the WAL is lost
		// (health invalidated).
		SafeWALSize json.RawMessage `json:"safe_wal_size,omitempty"`
	}
	slotPositionJSON struct {
		ConfirmedFlushLSN string  `json:"confirmed_flush_lsn,omitempty"`
		CurrentWALLSN     string  `json:"current_wal_lsn,omitempty"`
		LagBytes          *uint64 `json:"lag_bytes,omitempty"`
	}
	slotLeaderJSON struct {
		// Leader is the pgimageai run holding the slot's leader lock;
		// absent when none does.
		Leader *leaderJSON `json:"leader,omitempty"`
		// Squatters hold the leader lock's advisory key without leading
		// the slot; the bridge ignores them.
		Squatters []squatterJSON `json:"squatters,omitempty"`
	}
	slotFailoverJSON struct {
		// Failover is on, off or unsupported (before PostgreSQL 17);
		// FailoverAdvice says what it means.
		Failover       string `json:"failover,omitempty"`
		FailoverAdvice string `json:"failover_advice,omitempty"`
	}
	squatterJSON struct {
		PID  int32  `json:"pid"`
		Role string `json:"role"`
	}
	leaderJSON struct {
		PID         int32  `json:"pid"`
		Role        string `json:"role"`
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
		DelaySeconds *float64 `json:"delay_seconds"`
		// Pending is what the lane holds as the leader stored it within
		// the last 30 s, null when not known; OldestPendingSeconds is the
		// age of the oldest change it holds, null when none.
		Pending              *int64    `json:"pending"`
		OldestPendingSeconds *float64  `json:"oldest_pending_seconds"`
		UpdatedAt            time.Time `json:"updated_at"`
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

func statusDocument(r Status) statusJSON {
	var doc statusJSON
	doc.Slot = slotJSON{Name: r.Slot.Name, Exists: r.Slot.Found}
	doc.Rules, doc.Groups, doc.Lanes, doc.Backfills = []ruleJSON{}, []groupJSON{}, []laneJSON{}, []backfillJSON{}
	doc.Usage, doc.Gaps, doc.NotRecorded = usageDocument(r.Usage), gapsDocument(r.Gaps), errorCapsDocument(r.ErrorCaps)
	doc.Versions, doc.Switches, doc.History = resultVersionsDocument(r.Versions), switchesDocument(r.Switches), switchHistoryDocument(r.History)
	doc.OpenErrors = openErrorsJSON{
		ByReason: map[functions.Reason]int64{},
		ByRule:   map[string]map[functions.Reason]int64{},
	}
	doc.Slot.Failover, doc.Slot.FailoverAdvice = failover(r.Slot, r.Slot.ServerVersion)
	if l := r.Slot.Leader; l != nil {
		doc.Slot.Leader = &leaderJSON{PID: l.PID, Role: l.Role, Application: l.Application, Client: l.Client}
	}
	for _, h := range r.Slot.Squatters {
		doc.Slot.Squatters = append(doc.Slot.Squatters, squatterJSON{PID: h.PID, Role: h.Role})
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
	doc.Outages, doc.Parked = outagesJSON(r.Outages)
	doc.Models = []modelJSON{}
	for _, m := range r.Models {
		doc.Models = append(doc.Models, modelJSON{Model: m.Model, InFlight: m.InFlight, Concurrency: m.Limit, ConcurrencyBy: m.LimitBy, Ceiling: m.Ceil,
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
		j := laneJSON{Lane: l.Lane, LSN: l.LSN.String(), Ord: l.Ord, LagBytes: laneLag(l, r.Slot), UpdatedAt: l.UpdatedAt.UTC(), Pending: l.Pending}
		if l.OldestPending != nil {
			age := max(*l.OldestPending, 0).Seconds()
			j.OldestPendingSeconds = &age
		}
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
