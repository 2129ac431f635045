package render

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/state"
)

// samplePlan is the switch of rule embed from text-embedding-3-small to
// voyage-multimodal-3.
var samplePlan = state.SwitchPlan{Rule: "embed", Side: "embed@bbbbbbbb", From: "aaaaaaaa00000001", To: "bbbbbbbb00000002",
	FromModelID: "text-embedding-3-small", ToModelID: "voyage-multimodal-3", TargetTable: "public.vectors", Live: "v", Shadow: "v__vbbbbbbbb"}

// sampleSwitches are a switch held by failed rows with a request pending,
// and one that has not done a row yet, of a version not recorded.
func sampleSwitches() []SwitchStatus {
	held := state.SwitchProgress{SwitchPlan: samplePlan, State: "held", Detail: "3 rows failed with the new model", Request: "force",
		StartedAt: fixtureTime, Elapsed: time.Hour, RowsDone: 300, RowsTotal: pointerTo[int64](1200), Results: 297,
		Usage:   map[string]state.ModelUsage{"voyage": {Calls: 300, PromptTokens: 150000}},
		Holding: map[functions.Reason]int64{functions.ProviderError: 2, functions.BadResponse: 1}}
	fresh := state.SwitchProgress{SwitchPlan: state.SwitchPlan{Rule: "faces", Side: "faces@cccccccc", From: "dddddddd00000004", To: "cccccccc00000003",
		FromModelID: "clip", TargetTable: "public.faces", Live: "Vec", Shadow: "Vec__vcccccccc"},
		State: "computing", StartedAt: fixtureTime, Elapsed: 5 * time.Second}
	return []SwitchStatus{PriceSwitch(held, map[string]provider.Prices{"voyage": {In: 0.12}}), PriceSwitch(fresh, nil)}
}

func sampleHistory() []switchEnd {
	return []switchEnd{
		{Rule: "embed", From: "eeeeeeee00000005", To: "aaaaaaaa00000001", ToModelID: "text-embedding-3-small", Outcome: "switched",
			RowsSwitched: pointerTo[int64](1180), LockMillis: pointerTo(12.25), StartedAt: fixtureTime.Add(-48 * time.Hour), EndedAt: fixtureTime.Add(-24 * time.Hour)},
		{Rule: "faces", From: "dddddddd00000004", FromModelID: "clip", To: "ffffffff00000006", Outcome: "cancelled",
			StartedAt: fixtureTime.Add(-72 * time.Hour), EndedAt: fixtureTime.Add(-71 * time.Hour)},
	}
}

const sampleSwitchesText = `Switch of rule embed: text-embedding-3-small (aaaaaaaa) → voyage-multimodal-3 (bbbbbbbb)
  state    held: 3 rows failed with the new model
  columns  public.vectors.v__vbbbbbbbb computed beside v (side rule embed@bbbbbbbb)
  rows     300 of 1200 (25%) done, 297 results stored
  spent    300 calls, 150000 input and 0 output tokens, cost 0.01800 (at the model's price_per_1m_* options)
  eta      3h0m0s (at the rate since the start)
  failed   3 rows: provider_error 2, bad_response 1 (pgimageai errors --rule embed@bbbbbbbb lists them)
  request  force (the switch does not wait for the failed rows: they are NULL after it)
  started  2025-03-01T12:04:05Z (1h0m0s ago)

Switch of rule faces: clip (dddddddd) → cccccccc (not recorded)
  state    computing
  columns  public.faces."Vec__vcccccccc" computed beside "Vec" (side rule faces@cccccccc)
  rows     0 of an unknown total done, 0 results stored
  spent    no calls yet
  eta      - (no row done yet)
  started  2025-03-01T12:04:05Z (5s ago)
`

const sampleHistoryText = `Switches that ended (the last 5)
  RULE   FROM                     TO                                 OUTCOME    ROWS  LOCK     ENDED
  embed  eeeeeeee (not recorded)  text-embedding-3-small (aaaaaaaa)  switched   1180  12.2 ms  2025-02-28T12:04:05Z
  faces  clip (dddddddd)          ffffffff (not recorded)            cancelled  -     -        2025-02-26T13:04:05Z
`

func TestWriteSwitchList(t *testing.T) {
	tests := []struct {
		name string
		l    SwitchList
		want string
	}{
		{"switches and history", SwitchList{Switches: sampleSwitches(), History: sampleHistory()}, sampleSwitchesText + "\n" + sampleHistoryText},
		{"none", SwitchList{}, "Switches: none running\n"},
		{"none of a rule, its history", SwitchList{Rule: "embed", History: sampleHistory()[:1]}, `Switches: none running for rule embed

Switches that ended (the last 5)
  RULE   FROM                     TO                                 OUTCOME   ROWS  LOCK     ENDED
  embed  eeeeeeee (not recorded)  text-embedding-3-small (aaaaaaaa)  switched  1180  12.2 ms  2025-02-28T12:04:05Z
`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := WriteSwitchList(&out, tc.l, FormatTable); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestWriteSwitchListJSON(t *testing.T) {
	doc := decodeJSON(t, func(b *bytes.Buffer) error {
		return WriteSwitchList(b, SwitchList{Switches: sampleSwitches(), History: sampleHistory()}, FormatJSON)
	})
	switches, _ := doc["switches"].([]any)
	if len(switches) != 2 {
		t.Fatalf("switches = %#v", doc["switches"])
	}
	want := map[string]any{"rule": "embed", "side_rule": "embed@bbbbbbbb", "from_version": "aaaaaaaa00000001", "from_model_id": "text-embedding-3-small",
		"to_version": "bbbbbbbb00000002", "to_model_id": "voyage-multimodal-3", "target_table": "public.vectors", "live_column": "v",
		"shadow_column": "v__vbbbbbbbb", "state": "held", "detail": "3 rows failed with the new model", "request": "force",
		"rows_done": 300.0, "rows_total": 1200.0, "results": 297.0, "calls": 300.0, "prompt_tokens": 150000.0, "completion_tokens": 0.0,
		"cost": 0.018, "cost_upper_bound": false, "eta_seconds": 10800.0,
		"failed":     map[string]any{"provider_error": 2.0, "bad_response": 1.0},
		"started_at": "2025-03-01T12:04:05Z", "elapsed_seconds": 3600.0}
	got := switches[0].(map[string]any)
	if c, _ := got["cost"].(float64); math.Abs(c-0.018) < 1e-12 {
		got["cost"] = 0.018
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("embed = %#v\nwant %#v", got, want)
	}
	if f := switches[1].(map[string]any); f["to_model_id"] != nil || f["rows_total"] != nil || f["eta_seconds"] != nil || f["cost"] != 0.0 ||
		f["request"] != nil || f["detail"] != nil || !reflect.DeepEqual(f["failed"], map[string]any{}) {
		t.Errorf("faces = %#v", f)
	}
	history, _ := doc["switch_history"].([]any)
	if len(history) != 2 {
		t.Fatalf("switch_history = %#v", doc["switch_history"])
	}
	if h := history[0].(map[string]any); h["outcome"] != "switched" || h["rows_switched"] != 1180.0 || h["lock_ms"] != 12.25 ||
		h["from_model_id"] != nil || h["to_model_id"] != "text-embedding-3-small" || h["ended_at"] != "2025-02-28T12:04:05Z" {
		t.Errorf("history[0] = %#v", h)
	}
	empty := decodeJSON(t, func(b *bytes.Buffer) error { return WriteSwitchList(b, SwitchList{}, FormatJSON) })
	if !reflect.DeepEqual(empty, map[string]any{"switches": []any{}, "switch_history": []any{}}) {
		t.Errorf("no switches = %#v, want empty lists", empty)
	}
}

// TestWriteStatusVersions: status shows the results by version, the
// switches and the history after the rules, and in its JSON; nothing of
// them when there is nothing.
func TestWriteStatusVersions(t *testing.T) {
	r := statusOf("pgimageai")
	r.Versions, r.Switches, r.History = []resultVersion{
		{Rule: "caption", Version: "1a2b3c4d5e6f7a8b", ModelID: "gpt-4o-mini", Results: 118, Live: true},
		{Rule: "caption", Results: 40},
		{Rule: "embed", Version: "aaaaaaaa00000001", ModelID: "text-embedding-3-small", Results: 1200, Live: true},
		{Rule: "embed", Version: "eeeeeeee00000005", Results: 3},
	}, sampleSwitches()[:1], sampleHistory()
	var b bytes.Buffer
	if err := WriteStatus(&b, r, FormatTable); err != nil {
		t.Fatal(err)
	}
	want := `Rules: none (insert rows into pgimageai.rules)

Results by version (pgimageai.results; live: the version the rule's column holds)
  RULE     VERSION                       MODEL                   RESULTS
  caption  1a2b3c4d5e6f7a8b (live)       gpt-4o-mini             118
  caption  unrecorded (before versions)  -                       40
  embed    aaaaaaaa00000001 (live)       text-embedding-3-small  1200
  embed    eeeeeeee00000005              - (not recorded)        3

` + strings.Split(sampleSwitchesText, "\n\n")[0] + "\n\n" + sampleHistoryText + `
Lanes: none
`
	if !strings.Contains(b.String(), want) {
		t.Errorf("status:\n%s\nwant it to hold:\n%s", b.String(), want)
	}
	doc := decodeJSON(t, func(b *bytes.Buffer) error { return WriteStatus(b, r, FormatJSON) })
	versions, _ := doc["result_versions"].([]any)
	if len(versions) != 4 {
		t.Fatalf("result_versions = %#v", doc["result_versions"])
	}
	if v := versions[1].(map[string]any); !reflect.DeepEqual(v, map[string]any{"rule": "caption", "version": nil, "model_id": nil, "results": 40.0, "live": false}) {
		t.Errorf("unrecorded = %#v", v)
	}
	if v := versions[2].(map[string]any); v["version"] != "aaaaaaaa00000001" || v["model_id"] != "text-embedding-3-small" || v["live"] != true {
		t.Errorf("embed's live = %#v", v)
	}
	if s, _ := doc["switches"].([]any); len(s) != 1 {
		t.Errorf("switches = %#v", doc["switches"])
	}
	if h, _ := doc["switch_history"].([]any); len(h) != 2 {
		t.Errorf("switch_history = %#v", doc["switch_history"])
	}
	if text := sampleStatusTable(t); strings.Contains(text, "Results by version") || strings.Contains(text, "Switch") {
		t.Errorf("a status without versions shows them:\n%s", text)
	}
	empty := decodeJSON(t, func(b *bytes.Buffer) error { return WriteStatus(b, sampleStatus(), FormatJSON) })
	for _, k := range []string{"result_versions", "switches", "switch_history"} {
		if l, ok := empty[k].([]any); !ok || len(l) != 0 {
			t.Errorf("%s without any = %#v, want []", k, empty[k])
		}
	}
}

func TestSwitchETA(t *testing.T) {
	total := func(n int64) *int64 { return &n }
	tests := []struct {
		name   string
		s      state.SwitchProgress
		want   time.Duration
		wantOK bool
	}{
		{"a quarter in an hour", state.SwitchProgress{RowsDone: 250, RowsTotal: total(1000), Elapsed: time.Hour}, 3 * time.Hour, true},
		{"no row done yet", state.SwitchProgress{RowsTotal: total(1000), Elapsed: time.Hour}, 0, false},
		{"no row count", state.SwitchProgress{RowsDone: 5, Elapsed: time.Hour}, 0, false},
		{"every row done", state.SwitchProgress{RowsDone: 1000, RowsTotal: total(1000), Elapsed: time.Hour}, 0, false},
		{"more than the estimate", state.SwitchProgress{RowsDone: 1100, RowsTotal: total(1000), Elapsed: time.Hour}, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := switchETA(tc.s)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("switchETA = %s, %v; want %s, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// TestPriceSwitch: the side rule's usage at each model's prices, the way
// estimate prices calls; unknown when a model that answered has no price;
// an upper bound where a model has a batch API.
func TestPriceSwitch(t *testing.T) {
	usage := map[string]state.ModelUsage{
		"vision": {Calls: 10, PromptTokens: 1_000_000, CompletionTokens: 500_000},
		"embed":  {Calls: 4, PromptTokens: 2_000_000},
	}
	tests := []struct {
		name       string
		prices     map[string]provider.Prices
		want       *float64
		wantAtMost bool
	}{
		{"both priced", map[string]provider.Prices{"vision": {In: 0.15, Out: 0.6}, "embed": {In: 0.02}}, pointerTo(0.15 + 0.3 + 0.04), false},
		{"no output price", map[string]provider.Prices{"vision": {In: 0.15}, "embed": {In: 0.02}}, pointerTo(0.15 + 0.04), false},
		{"a model without prices", map[string]provider.Prices{"vision": {In: 0.15, Out: 0.6}}, nil, false},
		{"a batch API", map[string]provider.Prices{"vision": {In: 0.15, Out: 0.6, BatchAPI: true}, "embed": {In: 0.02}}, pointerTo(0.15 + 0.3 + 0.04), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := PriceSwitch(state.SwitchProgress{Usage: usage}, tc.prices)
			if (got.Cost == nil) != (tc.want == nil) || got.Cost != nil && math.Abs(*got.Cost-*tc.want) > 1e-9 || got.AtMost != tc.wantAtMost {
				t.Errorf("cost %v (at most %v), want %v (%v)", got.Cost, got.AtMost, tc.want, tc.wantAtMost)
			}
		})
	}
	if got := PriceSwitch(state.SwitchProgress{Usage: map[string]state.ModelUsage{}}, nil); got.Cost == nil || *got.Cost != 0 {
		t.Errorf("no usage: cost %v, want 0", got.Cost)
	}
}

func TestSwitchRequestText(t *testing.T) {
	s := state.SwitchRequested{SwitchPlan: samplePlan, State: "held"}
	tests := []struct {
		name     string
		req      string
		previous string
		want     []string
	}{
		{"force", state.SwitchForce, "", []string{"rule embed: force requested; the bridge switches the live column public.vectors.v to voyage-multimodal-3 (bbbbbbbb) without waiting for the rows whose new result failed: they are NULL after the switch"}},
		{"abort", state.SwitchAbort, "", []string{"rule embed: abort requested; the bridge drops the shadow column public.vectors.v__vbbbbbbbb and the side rule embed@bbbbbbbb's results, the live column keeps text-embedding-3-small (aaaaaaaa)"}},
		{"again", state.SwitchForce, state.SwitchForce, []string{"force requested (it was already, and the bridge has not taken it yet)"}},
		{"instead", state.SwitchAbort, state.SwitchForce, []string{"abort requested (it replaces the force request the bridge had not taken yet)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s.Previous = tc.previous
			got := SwitchRequestText(s, tc.req)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("got %q\nwant it to hold %q", got, w)
				}
			}
		})
	}
}
