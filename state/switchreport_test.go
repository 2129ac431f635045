package state_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/state"
)

const (
	versionA = "aaaaaaaa00000001" // text-embedding-3-small
	versionB = "bbbbbbbb00000002" // voyage-multimodal-3
)

// switchFixture fills the versions, a running switch of rule embed from
// versionA to versionB (side rule embed@bbbbbbbb, started an hour ago) and
// what its side rule did, and the results of embed and caption.
func switchFixture(tb testing.TB, conn *pgx.Conn) {
	tb.Helper()
	ctx := context.Background()
	for _, sql := range []string{
		`INSERT INTO pgimageai.versions (id, function, model, provider, model_id, options, model_row) VALUES
  ('aaaaaaaa00000001', 'AI_IMAGE_EMBED', 'emb', 'openai', 'text-embedding-3-small', '{}', '{}'),
  ('bbbbbbbb00000002', 'AI_IMAGE_EMBED', 'emb', 'voyage', 'voyage-multimodal-3', '{}', '{}')`,
		`INSERT INTO pgimageai.rule_versions (rule, version) VALUES ('embed', 'aaaaaaaa00000001'), ('caption', 'cccccccc00000003')`,
		`INSERT INTO pgimageai.results (rule, source_key, input_key, version) VALUES
  ('embed', '{"id": 1}', '\x01', 'aaaaaaaa00000001'), ('embed', '{"id": 2}', '\x02', 'aaaaaaaa00000001'),
  ('embed', '{"id": 3}', '\x03', NULL),
  ('embed@bbbbbbbb', '{"id": 1}', '\x01', 'bbbbbbbb00000002'), ('embed@bbbbbbbb', '{"id": 2}', '\x02', 'bbbbbbbb00000002'),
  ('thumbs', '{"id": 1}', '\x01', NULL)`,
		`INSERT INTO pgimageai.switches (rule, from_version, to_version, side_rule, target_table, live_column, shadow_column, state, started_at)
VALUES ('embed', 'aaaaaaaa00000001', 'bbbbbbbb00000002', 'embed@bbbbbbbb', 'public.vectors', 'v', 'v__vbbbbbbbb', 'held', now() - interval '1 hour')`,
		`INSERT INTO pgimageai.backfills (rule, state, rows_done, rows_total) VALUES ('embed@bbbbbbbb', 'running', 2, 8)`,
		`INSERT INTO pgimageai.usage (rule, model, day, calls, prompt_tokens, completion_tokens) VALUES
  ('embed@bbbbbbbb', 'emb', (now() AT TIME ZONE 'UTC')::date, 3, 300, 0),
  ('embed@bbbbbbbb', 'emb', (now() AT TIME ZONE 'UTC')::date - 3, 100, 10000, 0),
  ('embed', 'emb', (now() AT TIME ZONE 'UTC')::date, 7, 700, 0)`,
		`INSERT INTO pgimageai.errors (rule, source_table, source_key, reason, detail, resolved_at) VALUES
  ('embed@bbbbbbbb', 'public.photos', '{"id": 3}', 'provider_error', 'HTTP 400', NULL),
  ('embed@bbbbbbbb', 'public.photos', '{"id": 4}', 'bad_response', 'wrong dimension', NULL),
  ('embed@bbbbbbbb', 'public.photos', '{"id": 5}', 'provider_error', 'HTTP 400', NULL),
  ('embed@bbbbbbbb', 'public.photos', '{"id": 6}', 'empty_image', 'image is empty (0 bytes)', NULL),
  ('embed@bbbbbbbb', 'public.photos', '{"id": 7}', 'provider_error', 'HTTP 500', now()),
  ('embed', 'public.photos', '{"id": 8}', 'provider_error', 'HTTP 400', NULL)`,
		`INSERT INTO pgimageai.switch_history (rule, from_version, to_version, outcome, rows_switched, lock_ms, started_at, ended_at) VALUES
  ('embed', 'cccccccc00000003', 'aaaaaaaa00000001', 'switched', 2, 4.5, now() - interval '3 days', now() - interval '2 days'),
  ('caption', 'cccccccc00000003', 'dddddddd00000004', 'cancelled', NULL, NULL, now() - interval '2 days', now() - interval '1 day')`,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			tb.Fatalf("%s: %v", sql, err)
		}
	}
}

// TestResultVersions: the results of each rule by version, with the model
// id of recorded versions and the live one first; a live version without
// results counts 0; the side rule of a running switch is left out.
func TestResultVersions(t *testing.T) {
	conn := migrated(t)
	switchFixture(t, conn)
	got, err := state.ResultVersions(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	want := []state.ResultVersion{
		{Rule: "caption", Version: "cccccccc00000003", Results: 0, Live: true},
		{Rule: "embed", Version: versionA, ModelID: "text-embedding-3-small", Results: 2, Live: true},
		{Rule: "embed", Version: "", Results: 1},
		{Rule: "thumbs", Version: "", Results: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

// TestRunningSwitches: a switch with its versions' model ids, its side
// rule's backfill, results, usage since the day it started and the open
// errors that hold it (provider_error, bad_response; not an image's own
// fault, nor a resolved one, nor the rule's own).
func TestRunningSwitches(t *testing.T) {
	conn := migrated(t)
	switchFixture(t, conn)
	ctx := context.Background()
	got, err := state.RunningSwitches(ctx, conn, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("got %d switches, want 1: %+v", len(got), got)
	}
	s := got[0]
	plan := state.SwitchPlan{Rule: "embed", Side: "embed@bbbbbbbb", From: versionA, To: versionB,
		FromModelID: "text-embedding-3-small", ToModelID: "voyage-multimodal-3", TargetTable: "public.vectors", Live: "v", Shadow: "v__vbbbbbbbb"}
	if s.SwitchPlan != plan || s.State != "held" || s.Detail != "" || s.Request != "" {
		t.Errorf("switch %+v", s)
	}
	if s.Elapsed < 59*time.Minute || s.Elapsed > 61*time.Minute {
		t.Errorf("elapsed %s, want about 1h", s.Elapsed)
	}
	if s.RowsDone != 2 || s.RowsTotal == nil || *s.RowsTotal != 8 || s.Results != 2 {
		t.Errorf("rows %d of %v, results %d; want 2 of 8, 2", s.RowsDone, s.RowsTotal, s.Results)
	}
	if want := map[string]state.ModelUsage{"emb": {Calls: 3, PromptTokens: 300}}; !reflect.DeepEqual(s.Usage, want) {
		t.Errorf("usage %+v, want %+v (the days since it started)", s.Usage, want)
	}
	if want := map[functions.Reason]int64{functions.ProviderError: 2, functions.BadResponse: 1}; !reflect.DeepEqual(s.Holding, want) {
		t.Errorf("holding %+v, want %+v", s.Holding, want)
	}
	if other, err := state.RunningSwitches(ctx, conn, "caption"); err != nil || len(other) != 0 {
		t.Errorf("switches of caption: %+v, %v; want none", other, err)
	}
	live, err := state.RuleLiveVersion(ctx, conn, "embed")
	if err != nil {
		t.Fatal(err)
	}
	if want := (state.LiveVersion{Version: versionA, ModelID: "text-embedding-3-small", SwitchTo: versionB, SwitchState: "held"}); live != want {
		t.Errorf("live version %+v, want %+v", live, want)
	}
	if live, err := state.RuleLiveVersion(ctx, conn, "new"); err != nil || live != (state.LiveVersion{}) {
		t.Errorf("live version of a rule never run: %+v, %v", live, err)
	}
}

// TestSwitchHistory: the switches that ended, newest first, of one rule or
// all.
func TestSwitchHistory(t *testing.T) {
	conn := migrated(t)
	switchFixture(t, conn)
	ctx := context.Background()
	all, err := state.SwitchHistory(ctx, conn, "", 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].Rule != "caption" || all[0].Outcome != "cancelled" || all[0].RowsSwitched != nil || all[0].LockMillis != nil {
		t.Fatalf("history %+v", all)
	}
	if h := all[1]; h.Rule != "embed" || h.Outcome != "switched" || h.ToModelID != "text-embedding-3-small" || h.FromModelID != "" ||
		h.RowsSwitched == nil || *h.RowsSwitched != 2 || h.LockMillis == nil || *h.LockMillis != 4.5 || !h.EndedAt.After(h.StartedAt) {
		t.Errorf("embed's %+v", h)
	}
	if one, err := state.SwitchHistory(ctx, conn, "", 1); err != nil || len(one) != 1 {
		t.Errorf("limit 1: %+v, %v", one, err)
	}
	if embed, err := state.SwitchHistory(ctx, conn, "embed", 5); err != nil || len(embed) != 1 || embed[0].Rule != "embed" {
		t.Errorf("embed's history: %+v, %v", embed, err)
	}
}

// TestRequestSwitch: a request is set on a running switch and replaces one
// the bridge has not taken; a rule without a switch and an aborted switch
// are refused, with nothing written.
func TestRequestSwitch(t *testing.T) {
	conn := migrated(t)
	switchFixture(t, conn)
	ctx := context.Background()
	request := func() string {
		t.Helper()
		var r *string
		if err := conn.QueryRow(ctx, "SELECT request FROM pgimageai.switches WHERE rule = 'embed'").Scan(&r); err != nil {
			t.Fatal(err)
		}
		if r == nil {
			return ""
		}
		return *r
	}
	got, err := state.RequestSwitch(ctx, conn, "embed", state.SwitchForce)
	if err != nil {
		t.Fatal(err)
	}
	if got.Previous != "" || got.State != "held" || got.ToModelID != "voyage-multimodal-3" || got.Side != "embed@bbbbbbbb" || request() != "force" {
		t.Errorf("force: %+v, request %q", got, request())
	}
	if got, err = state.RequestSwitch(ctx, conn, "embed", state.SwitchAbort); err != nil || got.Previous != "force" || request() != "abort" {
		t.Errorf("abort: %+v, %v, request %q; want it to replace force", got, err, request())
	}
	if _, err := state.RequestSwitch(ctx, conn, "caption", state.SwitchForce); !errors.Is(err, state.ErrNoSwitch) {
		t.Errorf("a rule without a switch: %v, want ErrNoSwitch", err)
	}
	if _, err := conn.Exec(ctx, "UPDATE pgimageai.switches SET state = 'aborted', request = NULL"); err != nil {
		t.Fatal(err)
	}
	if _, err := state.RequestSwitch(ctx, conn, "embed", state.SwitchForce); !errors.Is(err, state.ErrSwitchAborted) || request() != "" {
		t.Errorf("an aborted switch: %v, request %q; want ErrSwitchAborted and none", err, request())
	}
	if _, err := state.RequestSwitch(ctx, conn, "embed", "later"); err == nil {
		t.Error("an unknown request was accepted")
	}
}
