package integration_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// switchCLIEnv is newCLIEnv with the bookkeeping of a running switch in the
// target, as a bridge leaves it: rule embed switching from version
// aaaaaaaa… (text-embedding-3-small) to bbbbbbbb… (voyage-multimodal-3) on
// the side rule embed@bbbbbbbb, held by two failed rows; caption's results
// before versions and of its live version; a switch of caption that ended.
func switchCLIEnv(t *testing.T) *cliEnv {
	t.Helper()
	e := newCLIEnv(t)
	e.source.Exec(t, `UPDATE pgimageai.models SET options = '{"price_per_1m_input_tokens": 0.5}' WHERE name = 'vision'`)
	e.target.Exec(t, `INSERT INTO pgimageai.versions (id, function, model, provider, model_id, options, model_row) VALUES
  ('aaaaaaaa00000001', 'AI_IMAGE_EMBED', 'vision', 'openai', 'text-embedding-3-small', '{}', '{}'),
  ('bbbbbbbb00000002', 'AI_IMAGE_EMBED', 'vision', 'voyage', 'voyage-multimodal-3', '{}', '{}'),
  ('cccccccc00000003', 'AI_IMAGE_COMPLETE', 'vision', 'openai', 'gpt-test', '{}', '{}');
INSERT INTO pgimageai.rule_versions (rule, version) VALUES ('embed', 'aaaaaaaa00000001'), ('caption', 'cccccccc00000003');
INSERT INTO pgimageai.results (rule, source_key, input_key, version)
  SELECT 'embed', jsonb_build_object('id', g), '\x01', 'aaaaaaaa00000001' FROM generate_series(1, 10) g;
INSERT INTO pgimageai.results (rule, source_key, input_key, version)
  SELECT 'embed@bbbbbbbb', jsonb_build_object('id', g), '\x01', 'bbbbbbbb00000002' FROM generate_series(1, 4) g;
INSERT INTO pgimageai.results (rule, source_key, input_key, version)
  SELECT 'caption', jsonb_build_object('id', g), '\x01', CASE WHEN g <= 3 THEN NULL ELSE 'cccccccc00000003' END FROM generate_series(1, 5) g;
INSERT INTO pgimageai.switches (rule, from_version, to_version, side_rule, target_table, live_column, shadow_column, state, detail, started_at)
  VALUES ('embed', 'aaaaaaaa00000001', 'bbbbbbbb00000002', 'embed@bbbbbbbb', 'public.vectors', 'v', 'v__vbbbbbbbb', 'held', '2 rows failed', now() - interval '10 minutes');
INSERT INTO pgimageai.backfills (rule, state, rows_done, rows_total) VALUES ('embed@bbbbbbbb', 'running', 6, 10);
INSERT INTO pgimageai.usage (rule, model, day, calls, prompt_tokens) VALUES ('embed@bbbbbbbb', 'vision', (now() AT TIME ZONE 'UTC')::date, 6, 2000000);
INSERT INTO pgimageai.errors (rule, source_table, source_key, reason, detail) VALUES
  ('embed@bbbbbbbb', 'public.photos', '{"id": 7}', 'provider_error', 'HTTP 400'),
  ('embed@bbbbbbbb', 'public.photos', '{"id": 8}', 'bad_response', 'wrong dimension');
INSERT INTO pgimageai.switch_history (rule, from_version, to_version, outcome, rows_switched, lock_ms, started_at, ended_at)
  VALUES ('caption', 'dddddddd00000004', 'cccccccc00000003', 'switched', 5, 3.5, '2025-03-01 10:00:00+00', '2025-03-01 11:00:00+00')`)
	return e
}

// TestCLISwitch: status shows the results by version and the running
// switch with its progress, spend, ETA and failures; switch lists it and
// sets an operator's request; a rule without a switch is a usage error.
func TestCLISwitch(t *testing.T) {
	e := switchCLIEnv(t)
	ctx := context.Background()
	out := e.mustRun(t, "status")
	wantLines(t, out,
		`^  caption +cccccccc00000003 \(live\) +gpt-test +2$`,
		`^  caption +unrecorded \(before versions\) +- +3$`,
		`^  embed +aaaaaaaa00000001 \(live\) +text-embedding-3-small +10$`,
		`^Switch of rule embed: text-embedding-3-small \(aaaaaaaa\) → voyage-multimodal-3 \(bbbbbbbb\)$`,
		`^  state +held: 2 rows failed$`,
		`^  rows +6 of 10 \(60%\) done, 4 results stored$`,
		`^  spent +6 calls, 2000000 input and 0 output tokens, cost 1\.00000 \(at the model's price_per_1m_\* options\)$`,
		`^  eta +[0-9]+m[0-9]+s \(at the rate since the start\)$`,
		`^  failed +2 rows: bad_response 1, provider_error 1 \(pgimageai errors --rule embed@bbbbbbbb lists them\)$`,
		`^  caption +dddddddd \(not recorded\) +gpt-test \(cccccccc\) +switched +5 +3\.5 ms +2025-03-01T11:00:00Z$`,
	)
	if strings.Contains(out, "embed@bbbbbbbb  ") && strings.Contains(out, "bbbbbbbb00000002 ") {
		t.Errorf("the side rule is listed among the results by version:\n%s", out)
	}

	var doc struct {
		Switches []struct {
			Rule     string         `json:"rule"`
			RowsDone int64          `json:"rows_done"`
			Calls    int64          `json:"calls"`
			Cost     *float64       `json:"cost"`
			ETA      *float64       `json:"eta_seconds"`
			Failed   map[string]int `json:"failed"`
		} `json:"switches"`
	}
	if err := json.Unmarshal([]byte(e.mustRun(t, "switch", "--format", "json")), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Switches) != 1 || doc.Switches[0].Rule != "embed" || doc.Switches[0].RowsDone != 6 || doc.Switches[0].Calls != 6 ||
		doc.Switches[0].Cost == nil || *doc.Switches[0].Cost != 1 || doc.Switches[0].ETA == nil || len(doc.Switches[0].Failed) != 2 {
		t.Errorf("switch --format json: %+v", doc.Switches)
	}
	wantLines(t, e.mustRun(t, "switch"), `^Switch of rule embed: `, `^Switches that ended \(the last 5\)$`)
	wantLines(t, e.mustRun(t, "switch", "--rule", "caption"), `^Switches: none running for rule caption$`, `^  caption +dddddddd`)

	wantLines(t, e.mustRun(t, "switch", "--rule", "embed", "--force"), `^rule embed: force requested; the bridge switches the live column public\.vectors\.v to voyage-multimodal-3 \(bbbbbbbb\)`)
	request := func() string {
		var r *string
		if err := e.tgt.QueryRow(ctx, "SELECT request FROM pgimageai.switches WHERE rule = 'embed'").Scan(&r); err != nil {
			t.Fatal(err)
		}
		if r == nil {
			return ""
		}
		return *r
	}
	if got := request(); got != "force" {
		t.Errorf("request = %q after --force", got)
	}
	wantLines(t, e.mustRun(t, "switch", "--rule", "embed", "--abort"), `^rule embed: abort requested \(it replaces the force request`)
	if got := request(); got != "abort" {
		t.Errorf("request = %q after --abort", got)
	}
	wantLines(t, e.mustRun(t, "status"), `^  request +abort \(not taken by the bridge yet\)$`)

	_, errOut, code := e.run(t, "switch", "--rule", "caption", "--force")
	if code != 2 || !strings.Contains(errOut, "rule caption has no running switch") || !strings.Contains(errOut, "its last switch, to gpt-test (cccccccc), ended switched at 2025-03-01T11:00:00Z") {
		t.Errorf("switch of a rule without one: exit %d, %s", code, errOut)
	}
	e.target.Exec(t, "UPDATE pgimageai.switches SET state = 'aborted', request = NULL")
	if _, errOut, code := e.run(t, "switch", "--rule", "embed", "--force"); code != 2 || !strings.Contains(errOut, "is aborted already") {
		t.Errorf("force of an aborted switch: exit %d, %s", code, errOut)
	}
}

// TestCLIEstimateSwitch: estimate says that a rule whose version is not its
// live column's re-computes every row on the side, at the backfill's cost,
// and says nothing of it once the versions are equal.
func TestCLIEstimateSwitch(t *testing.T) {
	e := newCLIEnv(t)
	e.source.Exec(t, `UPDATE pgimageai.rules SET switch = 'versioned' WHERE name = 'caption'`)
	e.target.Exec(t, `INSERT INTO pgimageai.versions (id, function, model, provider, model_id, options, model_row)
  VALUES ('aaaaaaaa00000001', 'AI_IMAGE_COMPLETE', 'vision', 'openai', 'gpt-old', '{}', '{}');
INSERT INTO pgimageai.rule_versions (rule, version) VALUES ('caption', 'aaaaaaaa00000001')`)
	out := e.mustRun(t, "estimate", "--rule", "caption")
	wantLines(t, out, `^Switch: changing to version gpt-test \([0-9a-f]{8}\) re-computes every row on the side, so the backfill above is its cost: 0 calls.*; the live column keeps gpt-old \(aaaaaaaa\) until one transaction switches it$`)

	var doc struct {
		Change *struct {
			Kind        string `json:"kind"`
			FromModelID string `json:"from_model_id"`
			ToVersion   string `json:"to_version"`
			ToModelID   string `json:"to_model_id"`
		} `json:"version_change"`
	}
	if err := json.Unmarshal([]byte(e.mustRun(t, "estimate", "--rule", "caption", "--format", "json")), &doc); err != nil {
		t.Fatal(err)
	}
	if c := doc.Change; c == nil || c.Kind != "switch" || c.FromModelID != "gpt-old" || c.ToModelID != "gpt-test" || len(c.ToVersion) != 16 {
		t.Fatalf("version_change = %+v", doc.Change)
	}
	e.target.Exec(t, `UPDATE pgimageai.rule_versions SET version = $1 WHERE rule = 'caption'`, doc.Change.ToVersion)
	if out := e.mustRun(t, "estimate", "--rule", "caption"); strings.Contains(out, "Switch") {
		t.Errorf("estimate of a rule at its live version speaks of a switch:\n%s", out)
	}
	e.target.Exec(t, `UPDATE pgimageai.rule_versions SET version = 'aaaaaaaa00000001' WHERE rule = 'caption'`)
	e.source.Exec(t, `UPDATE pgimageai.rules SET switch = NULL WHERE name = 'caption'`)
	wantLines(t, e.mustRun(t, "estimate", "--rule", "caption"), `^Change: changing to version gpt-test \([0-9a-f]{8}\) re-computes every row in place`)
}
