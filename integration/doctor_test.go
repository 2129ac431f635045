package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/migrations"
)

// doctorReport runs pgimageai doctor --format json with args and decodes it.
func doctorReport(t *testing.T, args ...string) (ok bool, checks map[string]map[string]string, code int) {
	t.Helper()
	out, errOut, code := cli(t, []string{"DOCTOR_TEST_KEY=sk-doctor-secret"}, append([]string{"doctor", "--format", "json"}, args...)...)
	if strings.Contains(out+errOut, "sk-doctor-secret") {
		t.Fatalf("doctor printed the key:\n%s%s", out, errOut)
	}
	var doc struct {
		OK     bool `json:"ok"`
		Checks []struct{ Area, Name, Status, Detail, Fix string }
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("doctor output is not JSON (exit %d): %v\n%s%s", code, err, out, errOut)
	}
	checks = map[string]map[string]string{}
	for _, c := range doc.Checks {
		key := c.Area + "/" + c.Name
		checks[key] = map[string]string{"status": c.Status, "detail": c.Detail, "fix": c.Fix}
		if c.Status != "pass" && c.Fix == "" {
			t.Errorf("%s: %s without what to do", key, c.Status)
		}
	}
	t.Logf("doctor %v: exit %d\n%s", args, code, out)
	return doc.OK, checks, code
}

func wantCheck(t *testing.T, checks map[string]map[string]string, key, status, detail, fix string) {
	t.Helper()
	c, ok := checks[key]
	if !ok {
		t.Errorf("no check %s", key)
		return
	}
	if c["status"] != status || !strings.Contains(c["detail"], detail) || !strings.Contains(c["fix"], fix) {
		t.Errorf("%s = %v, want %s with %q, fix %q", key, c, status, detail, fix)
	}
}

// TestDoctorHealthy: a database set up right passes (warnings aside) and
// exits 0.
func TestDoctorHealthy(t *testing.T) {
	s := localSource(t)
	ok, checks, code := doctorReport(t, "--dsn", s.db.DSN())
	if !ok || code != 0 {
		t.Fatalf("doctor on a healthy database: ok %v, exit %d", ok, code)
	}
	wantCheck(t, checks, "server/wal_level", "pass", "logical", "")
	wantCheck(t, checks, "rule caption/replica identity", "pass", "primary key", "")
	wantCheck(t, checks, "rule caption/image column", "pass", "bytea", "")
	wantCheck(t, checks, "model here/reachable", "pass", "calls no server", "")
	wantCheck(t, checks, "server/max_slot_wal_keep_size", "warn", "unlimited", "max_slot_wal_keep_size")
	wantCheck(t, checks, "role/privileges", "warn", "superuser", "least-privilege")
}

// TestDoctorSetUpWrong: every kind of fault doctor knows, each a ✗ with
// what to do, and exit 1.
func TestDoctorSetUpWrong(t *testing.T) {
	s := newSource(t)
	role := "doctor_" + fmt.Sprint(slotSeq.Add(1))
	s.exec(t, fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD 'doctor-pw'`, role))
	t.Cleanup(func() {
		db := s.db.Connect(t)
		db.Exec(context.Background(), fmt.Sprintf("DROP OWNED BY %s; DROP ROLE %s", role, role))
	})
	s.exec(t, fmt.Sprintf(`REVOKE CREATE ON DATABASE %q FROM PUBLIC; GRANT USAGE ON SCHEMA pgimageai TO %s; GRANT SELECT ON ALL TABLES IN SCHEMA pgimageai TO %s;
GRANT SELECT ON public.photos TO %s`, s.db.Name, role, role, role))
	s.exec(t, `CREATE TABLE public.notes (id int PRIMARY KEY, img text);
CREATE TABLE public.nokey (id int, img bytea);
CREATE TABLE public.nothing (id int PRIMARY KEY, img bytea);
ALTER TABLE public.nothing REPLICA IDENTITY NOTHING;
INSERT INTO pgimageai.models (name, provider, base_url, model, api_key_env) VALUES
  ('down', 'openai', 'http://127.0.0.1:1/v1', 'gpt-test', 'DOCTOR_TEST_KEY'),
  ('nokey', 'openai', NULL, 'gpt-test', 'DOCTOR_TEST_MISSING_KEY');
INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column) VALUES
  ('gone', 'public.missing', 'img', 'AI_IMAGE_COMPLETE', 'down', 'x', 'public.t1', 'c'),
  ('text', 'public.notes', 'img', 'AI_IMAGE_COMPLETE', 'down', 'x', 'public.t2', 'c'),
  ('nokey', 'public.nokey', 'img', 'AI_IMAGE_COMPLETE', 'down', 'x', 'public.t3', 'c'),
  ('nothing', 'public.nothing', 'img', 'AI_IMAGE_COMPLETE', 'down', 'x', 'public.t4', 'c'),
  ('embed', 'public.photos', 'img', 'AI_IMAGE_EMBED', 'down', NULL, 'public.t5', 'v'),
  ('unkeyed', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'nokey', 'x', 'public.t6', 'c')`)
	// A slot of the same name in another database.
	other := integration.NewDatabase(t)
	slot := "doctor_other_" + fmt.Sprint(slotSeq.Add(1))
	other.Exec(t, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", slot)
	t.Cleanup(func() { other.Exec(t, "SELECT pg_drop_replication_slot($1)", slot) })

	u, err := url.Parse(s.db.DSN())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, "doctor-pw")
	ok, checks, code := doctorReport(t, "--dsn", u.String(), "--slot", slot)
	if ok || code != 1 {
		t.Fatalf("doctor on a database set up wrong: ok %v, exit %d", ok, code)
	}
	wantCheck(t, checks, "role/privileges", "fail", "lacks REPLICATION", `ALTER ROLE "`+role+`" REPLICATION`)
	wantCheck(t, checks, "role/create publication", "fail", "may not CREATE", "GRANT CREATE ON DATABASE")
	wantCheck(t, checks, "slot "+slot+"/exists", "fail", "belongs to database "+other.Name, "--slot")
	wantCheck(t, checks, "rule gone/source table", "fail", "public.missing", "create the table")
	wantCheck(t, checks, "rule text/image column", "fail", "is text", "bytea")
	wantCheck(t, checks, "rule nokey/replica identity", "fail", "DEFAULT without a primary key", "ADD PRIMARY KEY")
	wantCheck(t, checks, "rule nothing/replica identity", "fail", "NOTHING", "REPLICA IDENTITY USING INDEX")
	wantCheck(t, checks, "rule embed/model", "fail", "AI_IMAGE_EMBED", "fix the model row")
	wantCheck(t, checks, "model down/reachable", "fail", "connection refused", "base_url")
	wantCheck(t, checks, "rule unkeyed/model", "fail", "DOCTOR_TEST_MISSING_KEY", "")
}

// TestDoctorWALLevel: a server whose wal_level is not logical is a ✗ that
// says how to turn it on.
func TestDoctorWALLevel(t *testing.T) {
	pg := integration.StartPostgresWith(t, "-c", "wal_level=replica")
	ctx := context.Background()
	db := pg.NewDatabase(t)
	conn := db.Connect(t)
	if _, err := migrations.Apply(ctx, conn); err != nil {
		t.Fatal(err)
	}
	ok, checks, code := doctorReport(t, "--dsn", db.DSN())
	if ok || code != 1 {
		t.Fatalf("doctor with wal_level replica: ok %v, exit %d", ok, code)
	}
	wantCheck(t, checks, "server/wal_level", "fail", "replica", "wal_level = logical")
}
