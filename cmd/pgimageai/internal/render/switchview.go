package render

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/state"
)

// What status and `pgimageai switch` show of rules' versions: the stored
// results by version, the running switches and the last that ended.

// SwitchHistoryRows is how many ended switches status and switch show.
const SwitchHistoryRows = 5

// resultVersion is how many stored results of a rule one version made.
type resultVersion = state.ResultVersion

// switchEnd is a row of pgimageai.switch_history.
type switchEnd = state.SwitchEnd

// SwitchStatus is a running switch and what its side rule spent, priced.
type SwitchStatus struct {
	state.SwitchProgress
	// Cost is the money of the side rule's usage at the full price of its
	// models' price_per_1m_* options; nil when a model that answered has
	// no price.
	Cost *float64
	// AtMost: a model of the side rule may answer through a batch API at
	// half the price, so Cost is an upper bound.
	AtMost bool
}

// Calls is the side rule's answered calls since the switch started.
func (s SwitchStatus) Calls() (calls, prompt, completion int64) {
	for _, u := range s.Usage {
		calls, prompt, completion = calls+u.Calls, prompt+u.PromptTokens, completion+u.CompletionTokens
	}
	return calls, prompt, completion
}

// PriceSwitch prices the side rule's usage of s at the models' prices (by
// models.name).
func PriceSwitch(s state.SwitchProgress, models map[string]provider.Prices) SwitchStatus {
	out := SwitchStatus{SwitchProgress: s}
	total, known := 0.0, true
	for model, u := range s.Usage {
		p := models[model]
		out.AtMost = out.AtMost || p.BatchAPI
		if u.Calls == 0 && u.PromptTokens == 0 && u.CompletionTokens == 0 {
			continue
		}
		c, ok := p.Cost(float64(u.PromptTokens), float64(u.CompletionTokens))
		known = known && ok
		total += c
	}
	if known {
		out.Cost = &total
	}
	return out
}

// switchETA is how long the side rule's backfill should take still, at
// its rate since the switch started; ok is false before any row is done,
// without a row count, or once the rows are done.
func switchETA(s state.SwitchProgress) (eta time.Duration, ok bool) {
	if s.RowsDone <= 0 || s.RowsTotal == nil || *s.RowsTotal <= s.RowsDone || s.Elapsed <= 0 {
		return 0, false
	}
	left := float64(*s.RowsTotal - s.RowsDone)
	return time.Duration(float64(s.Elapsed) * left / float64(s.RowsDone)), true
}

// holding sums the open errors that hold s, and lists them by reason, most
// first.
func holding(s state.SwitchProgress) (total int64, text string) {
	var counts []errorCount
	for r, n := range s.Holding {
		counts = append(counts, errorCount{Rule: s.Side, Reason: r, Count: n})
	}
	sums, total := byReason(counts)
	parts := make([]string, len(sums))
	for i, c := range sums {
		parts[i] = fmt.Sprintf("%s %d", c.Reason, c.Count)
	}
	return total, strings.Join(parts, ", ")
}

// shortVersion is the first 8 hex of a version's id, as side rules and
// shadow columns name it.
func shortVersion(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// VersionText names a version by its provider model id and short id.
func VersionText(id, modelID string) string {
	if modelID == "" {
		return shortVersion(id) + " (not recorded)"
	}
	return modelID + " (" + shortVersion(id) + ")"
}

// unrecorded is what status calls the results stored before versions were
// recorded.
const unrecorded = "unrecorded (before versions)"

func writeResultVersions(buf *bytes.Buffer, versions []resultVersion) {
	buf.WriteString("Results by version (pgimageai.results; live: the version the rule's column holds)\n")
	t := newTable(buf)
	t.row("RULE", "VERSION", "MODEL", "RESULTS")
	for _, v := range versions {
		version, model := v.Version, v.ModelID
		switch {
		case version == "":
			version, model = unrecorded, "-"
		case model == "":
			model = "- (not recorded)"
		}
		if v.Live {
			version += " (live)"
		}
		t.row(v.Rule, version, model, strconv.FormatInt(v.Results, 10))
	}
	t.flush()
}

// writeSwitches shows each running switch: the versions, where it stands,
// its rows, what it spent, when it should be done, what holds it and the
// operator's request.
func writeSwitches(buf *bytes.Buffer, switches []SwitchStatus) {
	for i, s := range switches {
		if i > 0 {
			buf.WriteByte('\n')
		}
		fmt.Fprintf(buf, "Switch of rule %s: %s → %s\n", s.Rule, VersionText(s.From, s.FromModelID), VersionText(s.To, s.ToModelID))
		t := newTable(buf)
		st := s.State
		if s.Detail != "" {
			st += ": " + s.Detail
		}
		t.row("state", st)
		t.row("columns", fmt.Sprintf("%s.%s computed beside %s (side rule %s)", s.TargetTable, catalog.QuoteIdent(s.Shadow),
			catalog.QuoteIdent(s.Live), s.Side))
		rows := strconv.FormatInt(s.RowsDone, 10)
		if s.RowsTotal != nil && *s.RowsTotal > 0 {
			rows += fmt.Sprintf(" of %d (%d%%)", *s.RowsTotal, min(100, s.RowsDone*100 / *s.RowsTotal))
		} else {
			rows += " of an unknown total"
		}
		t.row("rows", fmt.Sprintf("%s done, %d results stored", rows, s.Results))
		t.row("spent", spentText(s))
		eta := "-"
		if d, ok := switchETA(s.SwitchProgress); ok {
			eta = fmt.Sprintf("%s (at the rate since the start)", d.Round(time.Second))
		} else if s.RowsDone == 0 && s.State == "computing" {
			eta = "- (no row done yet)"
		}
		t.row("eta", eta)
		if n, by := holding(s.SwitchProgress); n > 0 {
			t.row("failed", fmt.Sprintf("%d rows: %s (pgimageai errors --rule %s lists them)", n, by, s.Side))
		}
		if s.Request != "" {
			t.row("request", requestText(s.Request))
		}
		t.row("started", fmt.Sprintf("%s (%s ago)", UTCTime(s.StartedAt), s.Elapsed.Round(time.Second)))
		t.flush()
	}
}

// requestText says what an operator's request does until the bridge has
// carried it out.
func requestText(req string) string {
	if req == state.SwitchForce {
		return req + " (the switch does not wait for the failed rows: they are NULL after it)"
	}
	return req + " (not taken by the bridge yet)"
}

// spentText says what a switch's side rule spent.
func spentText(s SwitchStatus) string {
	calls, prompt, completion := s.Calls()
	if calls == 0 {
		return "no calls yet"
	}
	text := fmt.Sprintf("%d calls, %d input and %d output tokens", calls, prompt, completion)
	switch {
	case s.Cost == nil:
		return text + ", cost unknown (no price_per_1m_* options)"
	case s.AtMost:
		return text + fmt.Sprintf(", cost at most %.5f (the full price of the model's price_per_1m_* options; Batch API answers cost half)", *s.Cost)
	}
	return text + fmt.Sprintf(", cost %.5f (at the model's price_per_1m_* options)", *s.Cost)
}

func writeSwitchHistory(buf *bytes.Buffer, history []switchEnd) {
	fmt.Fprintf(buf, "Switches that ended (the last %d)\n", SwitchHistoryRows)
	t := newTable(buf)
	t.row("RULE", "FROM", "TO", "OUTCOME", "ROWS", "LOCK", "ENDED")
	for _, h := range history {
		rows, lock := "-", "-"
		if h.RowsSwitched != nil {
			rows = strconv.FormatInt(*h.RowsSwitched, 10)
		}
		if h.LockMillis != nil {
			lock = strconv.FormatFloat(*h.LockMillis, 'f', 1, 64) + " ms"
		}
		t.row(h.Rule, VersionText(h.From, h.FromModelID), VersionText(h.To, h.ToModelID), h.Outcome, rows, lock, UTCTime(h.EndedAt))
	}
	t.flush()
}

// writeSwitchSection writes the running switches and the history, each
// followed by an empty line; nothing when there are neither.
func writeSwitchSection(buf *bytes.Buffer, switches []SwitchStatus, history []switchEnd) {
	if len(switches) > 0 {
		writeSwitches(buf, switches)
		buf.WriteByte('\n')
	}
	if len(history) > 0 {
		writeSwitchHistory(buf, history)
		buf.WriteByte('\n')
	}
}

// The JSON of versions and switches, in status's document and switch's.
type (
	resultVersionJSON struct {
		Rule    string  `json:"rule"`
		Version *string `json:"version"`  // null: stored before versions were recorded
		ModelID *string `json:"model_id"` // null: the version is not recorded
		Results int64   `json:"results"`
		Live    bool    `json:"live"`
	}
	// switchJSON is a running switch: what it switches, how far it is,
	// what it spent, and its clock. The embedded parts flatten into one
	// object.
	switchJSON struct {
		switchPlanJSON
		switchProgressJSON
		switchSpentJSON
		ETASeconds     *float64                   `json:"eta_seconds"` // null before a row is done or once all are
		Failed         map[functions.Reason]int64 `json:"failed"`      // the side rule's open errors that hold it
		StartedAt      time.Time                  `json:"started_at"`
		ElapsedSeconds float64                    `json:"elapsed_seconds"`
	}
	// switchPlanJSON is what a switch switches: the rule's versions and columns.
	switchPlanJSON struct {
		Rule         string  `json:"rule"`
		SideRule     string  `json:"side_rule"`
		FromVersion  string  `json:"from_version"`
		FromModelID  *string `json:"from_model_id"`
		ToVersion    string  `json:"to_version"`
		ToModelID    *string `json:"to_model_id"`
		TargetTable  string  `json:"target_table"`
		LiveColumn   string  `json:"live_column"`
		ShadowColumn string  `json:"shadow_column"`
	}
	// switchProgressJSON is how far a switch is.
	switchProgressJSON struct {
		// State is computing, indexing, ready, held or aborted; Detail
		// says why held or aborted.
		State   string  `json:"state"`
		Detail  *string `json:"detail"`
		Request *string `json:"request"` // force (the switch does not wait for failed rows) or abort (not taken by the bridge yet)
		// RowsTotal is the side rule's backfill's estimate, null when
		// unknown; Results its stored results.
		RowsDone  int64  `json:"rows_done"`
		RowsTotal *int64 `json:"rows_total"`
		Results   int64  `json:"results"`
	}
	// switchSpentJSON is the calls and tokens of the side rule since the
	// switch started; Cost at the full price of the models'
	// price_per_1m_* options (null without prices), an upper bound when
	// CostAtMost.
	switchSpentJSON struct {
		Calls            int64    `json:"calls"`
		PromptTokens     int64    `json:"prompt_tokens"`
		CompletionTokens int64    `json:"completion_tokens"`
		Cost             *float64 `json:"cost"`
		CostAtMost       bool     `json:"cost_upper_bound"`
	}
	switchEndJSON struct {
		Rule         string    `json:"rule"`
		FromVersion  string    `json:"from_version"`
		FromModelID  *string   `json:"from_model_id"`
		ToVersion    string    `json:"to_version"`
		ToModelID    *string   `json:"to_model_id"`
		Outcome      string    `json:"outcome"` // switched, forced, aborted or cancelled
		RowsSwitched *int64    `json:"rows_switched"`
		LockMillis   *float64  `json:"lock_ms"`
		StartedAt    time.Time `json:"started_at"`
		EndedAt      time.Time `json:"ended_at"`
	}
)

// OrNull is nil for "", else a pointer to s.
func OrNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func resultVersionsDocument(versions []resultVersion) []resultVersionJSON {
	out := []resultVersionJSON{}
	for _, v := range versions {
		out = append(out, resultVersionJSON{Rule: v.Rule, Version: OrNull(v.Version), ModelID: OrNull(v.ModelID), Results: v.Results, Live: v.Live})
	}
	return out
}

func switchesDocument(switches []SwitchStatus) []switchJSON {
	out := []switchJSON{}
	for _, s := range switches {
		calls, prompt, completion := s.Calls()
		j := switchJSON{
			switchPlanJSON: switchPlanJSON{Rule: s.Rule, SideRule: s.Side, FromVersion: s.From, FromModelID: OrNull(s.FromModelID),
				ToVersion: s.To, ToModelID: OrNull(s.ToModelID), TargetTable: s.TargetTable, LiveColumn: s.Live, ShadowColumn: s.Shadow},
			switchProgressJSON: switchProgressJSON{State: s.State, Detail: OrNull(s.Detail), Request: OrNull(s.Request),
				RowsDone: s.RowsDone, RowsTotal: s.RowsTotal, Results: s.Results},
			switchSpentJSON: switchSpentJSON{Calls: calls, PromptTokens: prompt, CompletionTokens: completion, Cost: s.Cost, CostAtMost: s.AtMost},
			Failed:          map[functions.Reason]int64{}, StartedAt: s.StartedAt.UTC(), ElapsedSeconds: s.Elapsed.Round(time.Second).Seconds()}
		if d, ok := switchETA(s.SwitchProgress); ok {
			secs := d.Round(time.Second).Seconds()
			j.ETASeconds = &secs
		}
		for r, n := range s.Holding {
			j.Failed[r] = n
		}
		out = append(out, j)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rule < out[j].Rule })
	return out
}

func switchHistoryDocument(history []switchEnd) []switchEndJSON {
	out := []switchEndJSON{}
	for _, h := range history {
		out = append(out, switchEndJSON{Rule: h.Rule, FromVersion: h.From, FromModelID: OrNull(h.FromModelID), ToVersion: h.To,
			ToModelID: OrNull(h.ToModelID), Outcome: h.Outcome, RowsSwitched: h.RowsSwitched, LockMillis: h.LockMillis,
			StartedAt: h.StartedAt.UTC(), EndedAt: h.EndedAt.UTC()})
	}
	return out
}
