package integration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/migrations"
)

// cliEnv is a source and a separate target database, both migrated, with
// rules, a replication slot and bookkeeping rows as a bridge leaves them:
// rules and the slot live in the source; errors, the checkpoint and
// backfills in the target.
type cliEnv struct {
	source, target *integration.Database
	src, tgt       *pgx.Conn
	slot           string
}

// cliSlotName makes a slot name unique in the container from db's name.
func cliSlotName(db *integration.Database, suffix string) string {
	name := db.Name
	if len(name) > 50 {
		name = name[:50]
	}
	return name + "_" + suffix
}

func newCLIEnv(t *testing.T) *cliEnv {
	t.Helper()
	ctx := context.Background()
	e := &cliEnv{source: integration.NewDatabase(t), target: integration.NewDatabase(t)}
	e.src, e.tgt = e.source.Connect(t), e.target.Connect(t)
	for _, conn := range []*pgx.Conn{e.src, e.tgt} {
		if _, err := migrations.Apply(ctx, conn); err != nil {
			t.Fatal(err)
		}
	}
	e.source.Exec(t, `CREATE TABLE public.photos (id int PRIMARY KEY, img bytea);
INSERT INTO pgimageai.models (name, provider, model, api_key_env) VALUES ('vision', 'openai', 'gpt-test', 'CLI_TEST_SECRET_KEY');
INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column, enabled) VALUES
  ('caption', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'vision', 'Describe', 'public.captions', 'caption', true),
  ('embed', 'public.photos', 'img', 'AI_IMAGE_EMBED', 'vision', NULL, 'public.vectors', 'v', true),
  ('old', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'vision', 'Old', 'public.old', 'text', false)`)

	e.slot = cliSlotName(e.source, "bridge")
	e.source.Exec(t, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", e.slot)
	// WAL after the slot's confirmed position: a lag to show.
	e.source.Exec(t, "INSERT INTO public.photos SELECT g, '\\x'::bytea FROM generate_series(1, 100) g")

	e.target.Exec(t, `INSERT INTO pgimageai.errors (rule, source_table, source_key, reason, detail, image_bytes, image_head, lsn, attempts, created_at) VALUES
  ('caption', 'public.photos', '{"id": 1}', 'empty_image', 'the image is empty', 0, NULL, '0/1000', 1, '2025-03-01 10:00:00+00'),
  ('caption', 'public.photos', '{"id": 2}', 'provider_error', 'model vision: HTTP 400: '||repeat('y', 150), 2048, '\x89504e47', '0/2000', 5, '2025-03-01 11:00:00+00'),
  ('caption', 'public.photos', '{"id": 3}', 'provider_error', 'model vision: HTTP 503 after 4 retries', 2048, '\x89504e47', '0/3000', 1, '2025-03-01 12:00:00+00'),
  ('embed', 'public.photos', '{}', 'invalid_rule', 'model vision: provider openai cannot AI_IMAGE_EMBED', NULL, NULL, NULL, 1, '2025-03-01 09:00:00+00');
INSERT INTO pgimageai.errors (rule, source_table, source_key, reason, detail, created_at, resolved_at) VALUES
  ('caption', 'public.photos', '{"id": 4}', 'too_large', 'resolved long ago', '2025-02-01 00:00:00+00', '2025-02-02 00:00:00+00')`)
	e.target.Exec(t, `INSERT INTO pgimageai.checkpoints (slot, lsn, updated_at) VALUES ($1, '0/16B3748', '2025-03-01 12:30:00+00')`, e.slot)
	e.target.Exec(t, `INSERT INTO pgimageai.backfills (rule, state, rows_done, rows_total, updated_at) VALUES
  ('caption', 'running', 40, 100, '2025-03-01 12:31:00+00')`)
	return e
}

// run runs the pgimageai binary with the settings of e and args; it fails
// the test if the output shows the password of a DSN or the key variable.
func (e *cliEnv) run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	all := append([]string{args[0], "--dsn", e.source.DSN(), "--target-dsn", e.target.DSN(), "--slot", e.slot}, args[1:]...)
	stdout, stderr, code = cli(t, []string{"CLI_TEST_SECRET_KEY=sk-cli-test-secret"}, all...)
	for _, secret := range []string{"pgimageai-test", "sk-cli-test-secret"} {
		if strings.Contains(stdout+stderr, secret) {
			t.Fatalf("pgimageai %s printed a secret:\n%s%s", args[0], stdout, stderr)
		}
	}
	return stdout, stderr, code
}

// cli runs the pgimageai binary with env added to the environment and
// returns its output and exit code.
func cli(t testing.TB, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(pgimageaiBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// mustRun is run that expects exit code 0.
func (e *cliEnv) mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := e.run(t, args...)
	if code != 0 {
		t.Fatalf("pgimageai %v: exit %d\n%s%s", args, code, out, errOut)
	}
	t.Logf("pgimageai %s:\n%s", strings.Join(args, " "), out)
	return out
}

func wantLines(t *testing.T, out string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(`(?m)` + p).MatchString(out) {
			t.Errorf("output lacks a line matching %q:\n%s", p, out)
		}
	}
}

func TestCLIStatus(t *testing.T) {
	e := newCLIEnv(t)
	out := e.mustRun(t, "status")
	wantLines(t, out,
		`^  name +`+e.slot+`$`,
		`^  plugin +pgoutput$`,
		`^  database +`+e.source.Name+`$`,
		`^  active +no$`,
		`^  wal_status +reserved$`,
		`^  safe_wal_size +unlimited \(max_slot_wal_keep_size = -1\)$`,
		`^  confirmed_flush_lsn +[0-9A-F]+/[0-9A-F]+$`,
		`^  lag +[1-9][0-9]* bytes`,
		`^  checkpoint +0/16B3748 \(updated 2025-03-01T12:30:00Z\)$`,
		`^  caption +yes +AI_IMAGE_COMPLETE +vision +public\.photos\.img +→ +public\.captions\.caption +valid$`,
		`^  embed +yes +AI_IMAGE_EMBED +vision +public\.photos\.img +→ +public\.vectors\.v +invalid: model vision: provider openai cannot AI_IMAGE_EMBED$`,
		`^  old +no +AI_IMAGE_COMPLETE .* disabled$`,
		`^  caption +running +40/100 +2025-03-01T12:31:00Z$`,
		`^Open errors: 4 `,
		`^  provider_error +2$`,
		`^  empty_image +1$`,
		`^  invalid_rule +1$`,
		`^  caption +provider_error +2$`,
	)
	if strings.Contains(out, "too_large") {
		t.Errorf("a resolved error is counted:\n%s", out)
	}

	var doc struct {
		Slot struct {
			Name              string `json:"name"`
			Exists            bool   `json:"exists"`
			Active            bool   `json:"active"`
			ConfirmedFlushLSN string `json:"confirmed_flush_lsn"`
			CurrentWALLSN     string `json:"current_wal_lsn"`
			LagBytes          uint64 `json:"lag_bytes"`
		} `json:"slot"`
		Checkpoint struct {
			LSN string `json:"lsn"`
		} `json:"checkpoint"`
		Rules []struct {
			Name   string  `json:"name"`
			Status string  `json:"status"`
			Reason *string `json:"invalid_reason"`
		} `json:"rules"`
		OpenErrors struct {
			Total    int                       `json:"total"`
			ByReason map[string]int            `json:"by_reason"`
			ByRule   map[string]map[string]int `json:"by_rule"`
		} `json:"open_errors"`
	}
	js := e.mustRun(t, "status", "--format", "json")
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatalf("status --format json: %v\n%s", err, js)
	}
	var confirmed pglogrepl.LSN
	if err := e.src.QueryRow(context.Background(), "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = $1", e.slot).Scan(&confirmed); err != nil {
		t.Fatal(err)
	}
	current, err := pglogrepl.ParseLSN(doc.Slot.CurrentWALLSN)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Slot.Name != e.slot || !doc.Slot.Exists || doc.Slot.Active || doc.Slot.ConfirmedFlushLSN != confirmed.String() ||
		doc.Slot.LagBytes == 0 || doc.Slot.LagBytes != uint64(current-confirmed) {
		t.Errorf("slot = %+v (confirmed_flush_lsn in pg_replication_slots %s)", doc.Slot, confirmed)
	}
	if doc.Checkpoint.LSN != "0/16B3748" {
		t.Errorf("checkpoint = %+v", doc.Checkpoint)
	}
	if len(doc.Rules) != 3 || doc.Rules[0].Status != "valid" || doc.Rules[1].Status != "invalid" ||
		doc.Rules[1].Reason == nil || *doc.Rules[1].Reason != "model vision: provider openai cannot AI_IMAGE_EMBED" || doc.Rules[2].Status != "disabled" {
		t.Errorf("rules = %+v", doc.Rules)
	}
	wantReasons := map[string]int{"empty_image": 1, "provider_error": 2, "invalid_rule": 1}
	wantRules := map[string]map[string]int{"caption": {"empty_image": 1, "provider_error": 2}, "embed": {"invalid_rule": 1}}
	if doc.OpenErrors.Total != 4 || !reflect.DeepEqual(doc.OpenErrors.ByReason, wantReasons) || !reflect.DeepEqual(doc.OpenErrors.ByRule, wantRules) {
		t.Errorf("open_errors = %+v", doc.OpenErrors)
	}
}

func TestCLIStatusWithoutSlot(t *testing.T) {
	e := newCLIEnv(t)
	missing := cliSlotName(e.source, "never")
	out := e.mustRun(t, "status", "--slot", missing)
	wantLines(t, out, `^  name +`+missing+`$`, `^  state +not created yet \(run pgimageai run\)$`, `^  checkpoint +none stored yet$`)

	js := e.mustRun(t, "status", "--slot", missing, "--format", "json")
	var doc struct {
		Slot       map[string]any `json:"slot"`
		Checkpoint any            `json:"checkpoint"`
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(doc.Slot, map[string]any{"name": missing, "exists": false}) || doc.Checkpoint != nil {
		t.Errorf("slot %v, checkpoint %v", doc.Slot, doc.Checkpoint)
	}
}

func TestCLIStatusUnmigrated(t *testing.T) {
	e := newCLIEnv(t)
	e.target.Exec(t, "DROP SCHEMA pgimageai CASCADE")
	_, errOut, code := e.run(t, "status")
	if code != 1 || !strings.Contains(errOut, "(run pgimageai migrate)") || !strings.Contains(errOut, "target database postgres@") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

func TestCLIErrors(t *testing.T) {
	e := newCLIEnv(t)
	out := e.mustRun(t, "errors")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("want a header and 4 errors:\n%s", out)
	}
	wantLines(t, lines[0], `^  ID +RULE +SOURCE_TABLE +SOURCE_KEY +REASON +ATTEMPTS +CREATED_AT +DETAIL$`)
	// Newest first; the detail is cut to 100 characters.
	wantLines(t, lines[1], `^  \d+ +caption +public\.photos +\{"id": 3\} +provider_error +1 +2025-03-01T12:00:00Z +model vision: HTTP 503 after 4 retries$`)
	wantLines(t, lines[2], `^  \d+ +caption +public\.photos +\{"id": 2\} +provider_error +5 +2025-03-01T11:00:00Z +model vision: HTTP 400: y{75}…$`)
	wantLines(t, lines[3], `^  \d+ +caption +public\.photos +\{"id": 1\} +empty_image +1 +2025-03-01T10:00:00Z +the image is empty$`)
	wantLines(t, lines[4], `^  \d+ +embed +public\.photos +\{\} +invalid_rule +1 +2025-03-01T09:00:00Z +model vision: provider openai cannot AI_IMAGE_EMBED$`)

	out = e.mustRun(t, "errors", "--rule", "caption", "--reason", "provider_error", "--limit", "1")
	wantLines(t, out, `\{"id": 3\}`, `^showing the newest 1 of 2 open errors that match --rule caption --reason provider_error; --limit 0 lists all$`)
	if strings.Contains(out, `{"id": 2}`) {
		t.Errorf("--limit 1 listed more:\n%s", out)
	}

	out = e.mustRun(t, "errors", "--rule", "nosuchrule")
	if out != "no open errors that match --rule nosuchrule\n" {
		t.Errorf("got %q", out)
	}

	var doc struct {
		Matching int `json:"matching"`
		Errors   []struct {
			Rule       string         `json:"rule"`
			SourceKey  map[string]any `json:"source_key"`
			Reason     string         `json:"reason"`
			Detail     string         `json:"detail"`
			ImageBytes *int           `json:"image_bytes"`
			LSN        *string        `json:"lsn"`
			Attempts   int            `json:"attempts"`
		} `json:"errors"`
	}
	js := e.mustRun(t, "errors", "--reason", "provider_error", "--format", "json")
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatalf("%v\n%s", err, js)
	}
	if doc.Matching != 2 || len(doc.Errors) != 2 {
		t.Fatalf("got %+v", doc)
	}
	if got := doc.Errors[1]; !reflect.DeepEqual(got.SourceKey, map[string]any{"id": 2.0}) || got.Detail != "model vision: HTTP 400: "+strings.Repeat("y", 150) ||
		got.ImageBytes == nil || *got.ImageBytes != 2048 || got.LSN == nil || *got.LSN != "0/2000" || got.Attempts != 5 {
		t.Errorf("errors[1] = %+v", got)
	}
}

// retryRequests consumes the changes of the test_decoding slot and returns
// each row inserted into pgimageai.retry_requests, as "rule=… reason=…", by
// its LSN.
func retryRequests(t *testing.T, conn *pgx.Conn, slot string) map[pglogrepl.LSN]string {
	t.Helper()
	rows, _ := conn.Query(context.Background(), "SELECT lsn, data FROM pg_logical_slot_get_changes($1, NULL, NULL)", slot)
	got := map[pglogrepl.LSN]string{}
	var lsn pglogrepl.LSN
	var data string
	_, err := pgx.ForEachRow(rows, []any{&lsn, &data}, func() error {
		if m := retryRow.FindStringSubmatch(data); m != nil {
			got[lsn] = "rule=" + m[1] + " reason=" + m[2]
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// retryRow matches test_decoding's line for an INSERT into retry_requests.
var retryRow = regexp.MustCompile(`^table pgimageai\.retry_requests: INSERT: id\[bigint\]:\d+ rule\[text\]:(\S+) reason\[text\]:(\S+)`)

func TestCLIRetry(t *testing.T) {
	e := newCLIEnv(t)
	peek := cliSlotName(e.source, "peek")
	e.source.Exec(t, "SELECT pg_create_logical_replication_slot($1, 'test_decoding')", peek)
	position := regexp.MustCompile(`WAL position ([0-9A-F]+/[0-9A-F]+)\n`)

	tests := []struct {
		name    string
		args    []string
		out     string // a regexp
		content string // of the request row; "" = none
	}{
		{"all but invalid_rule", nil, `^3 open errors match; the running bridge will reprocess them at WAL position [0-9A-F]+/[0-9A-F]+\n` +
			`slot \S+ is not active: the request waits in the WAL until pgimageai run resumes\n$`, `rule=null reason=null`},
		{"by rule and reason", []string{"--rule", "caption", "--reason", "provider_error"},
			`^2 open errors match; the running bridge will reprocess them at WAL position`, `rule='caption' reason='provider_error'`},
		{"one", []string{"--reason", "empty_image"}, `^1 open error matches; the running bridge will reprocess it at WAL position`, `rule=null reason='empty_image'`},
		{"invalid rules are not retried", []string{"--rule", "embed"},
			`^no open errors that match --rule embed \(invalid_rule aside\); nothing to retry\n$`, ""},
		{"none", []string{"--reason", "too_large"}, `^no open errors that match --reason too_large \(invalid_rule aside\); nothing to retry\n$`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := e.mustRun(t, append([]string{"retry"}, tc.args...)...)
			if !regexp.MustCompile(tc.out).MatchString(out) {
				t.Fatalf("output %q does not match %q", out, tc.out)
			}
			got := retryRequests(t, e.src, peek)
			if tc.content == "" {
				if len(got) != 0 {
					t.Fatalf("requested %v, want nothing", got)
				}
				return
			}
			lsn, err := pglogrepl.ParseLSN(position.FindStringSubmatch(out)[1])
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 {
				t.Fatalf("requests %v, want one", got)
			}
			for at, content := range got {
				if content != tc.content || at > lsn {
					t.Fatalf("request %q at %s, want %q at or before the reported %s", content, at, tc.content, lsn)
				}
			}
		})
	}

	t.Run("usage", func(t *testing.T) {
		_, errOut, code := e.run(t, "retry", "--reason", "invalid_rule")
		if code != 2 || !strings.Contains(errOut, "not retried") {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
	})
	t.Run("slot of another database", func(t *testing.T) {
		other := cliSlotName(e.target, "other")
		e.target.Exec(t, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", other)
		_, errOut, code := e.run(t, "retry", "--slot", other)
		if code != 1 || !strings.Contains(errOut, "belongs to database \""+e.target.Name+"\"") {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		if got := retryRequests(t, e.src, peek); len(got) != 0 {
			t.Fatalf("emitted %v for another database's slot", got)
		}
	})
	t.Run("without the bridge's slot", func(t *testing.T) {
		_, errOut, code := e.run(t, "retry", "--slot", cliSlotName(e.source, "never"))
		if code != 1 || !strings.Contains(errOut, "does not exist") || !strings.Contains(errOut, "start pgimageai run first") {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		if got := retryRequests(t, e.src, peek); len(got) != 0 {
			t.Fatalf("emitted %v without a slot", got)
		}
	})
}
