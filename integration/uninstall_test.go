package integration_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/migrations"
)

// localSource is a migrated database with public.photos and one rule on the
// offline local provider, whose captions go to public.captions.
func localSource(t *testing.T) *source {
	t.Helper()
	s := newSource(t)
	s.exec(t, `INSERT INTO pgimageai.models (name, provider, model) VALUES ('here', 'local', 'any');
INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('caption', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'here', 'Describe', 'public.captions', 'caption')`)
	return s
}

// runDefaults starts `pgimageai run` on db with nothing but its DSN (the
// default slot and publication), and waits until a slot of db streams.
func runDefaults(t *testing.T, s *source) *process {
	t.Helper()
	logf, err := os.CreateTemp(t.TempDir(), "pgimageai-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(pgimageaiBinary(t), "run")
	cmd.Env = append(os.Environ(), "PGIMAGEAI_DSN="+s.db.DSN())
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, log: logf, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.signal(t, syscall.SIGKILL)
		}
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("pgimageai log:\n%s", b)
		}
	})
	integration.WaitFor(t, 60*time.Second, "a slot of "+s.db.Name+" to stream", func() bool {
		select {
		case <-p.done:
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("pgimageai run exited: %v\n%s", p.err, b)
		default:
		}
		return queryInt(t, s.conn, `SELECT count(*) FROM pg_replication_slots sl JOIN pg_stat_replication r ON r.pid = sl.active_pid
WHERE sl.database = current_database() AND r.state = 'streaming'`) == 1
	})
	return p
}

// slotsOf lists the slots of s's database.
func slotsOf(t *testing.T, s *source) []string {
	t.Helper()
	rows, err := s.conn.Query(context.Background(), "SELECT slot_name FROM pg_replication_slots WHERE database = current_database() ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// dropSlotsOf drops the slots of s's database once the test ends: the
// default names are not the harness's, so nothing else cleans them up.
func dropSlotsOf(t *testing.T, s *source) {
	t.Cleanup(func() {
		db := s.db.Connect(t)
		_, _ = db.Exec(context.Background(), "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = current_database() AND NOT active")
	})
}

// TestTwoDatabasesDefaultSlots: two databases of one server, each with a
// bridge started with nothing but its DSN, stream side by side on slots of
// their own; each status shows its own slot and its own leader.
func TestTwoDatabasesDefaultSlots(t *testing.T) {
	a, b := localSource(t), localSource(t)
	dropSlotsOf(t, a)
	dropSlotsOf(t, b)
	pa, pb := runDefaults(t, a), runDefaults(t, b)
	sa, sb := slotsOf(t, a), slotsOf(t, b)
	if len(sa) != 1 || len(sb) != 1 || sa[0] == sb[0] {
		t.Fatalf("slots %v and %v: want one each, not the same", sa, sb)
	}
	for _, s := range []*source{a, b} {
		s.exec(t, "INSERT INTO public.photos (id, img) VALUES (1, $1)", pngImage(t, 1))
		waitResults(t, s, 1, "in "+s.db.Name)
	}
	for _, c := range []struct {
		s    *source
		slot string
		p    *process
	}{{a, sa[0], pa}, {b, sb[0], pb}} {
		out, errOut, code := cli(t, nil, "status", "--dsn", c.s.db.DSN())
		if code != 0 {
			t.Fatalf("status of %s: exit %d\n%s%s", c.s.db.Name, code, out, errOut)
		}
		if !strings.Contains(out, c.slot) {
			t.Errorf("status of %s does not name its slot %s:\n%s", c.s.db.Name, c.slot, out)
		}
		if want := fmt.Sprintf("pid %d", leaderBackend(t, c.s, c.slot)); !strings.Contains(out, want) {
			t.Errorf("status of %s does not show its own leader (%s):\n%s", c.s.db.Name, want, out)
		}
	}
	for _, p := range []*process{pa, pb} {
		if err := p.signal(t, syscall.SIGTERM); err != nil {
			t.Fatalf("graceful stop: %v", err)
		}
	}
}

// leaderBackend is the backend PID that holds slot's leader lock in s's
// database.
func leaderBackend(t *testing.T, s *source, slot string) int {
	t.Helper()
	return queryInt(t, s.conn, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
AND classid = hashtext('pgimageai.leader')::oid AND objid = hashtext($1)::oid AND objsubid = 2`, slot)
}

// TestLegacyDefaultSlotKept: a database whose bridge streams the slot of the
// old default name (pgimageai) keeps it when started again without --slot:
// no new slot, and the change made while it was stopped is not lost.
func TestLegacyDefaultSlotKept(t *testing.T) {
	s := localSource(t)
	dropSlotsOf(t, s)
	// As an earlier release left it: the publication, then the slot.
	s.exec(t, "CREATE PUBLICATION pgimageai")
	s.exec(t, "SELECT pg_create_logical_replication_slot('pgimageai', 'pgoutput')")
	s.exec(t, `INSERT INTO pgimageai.checkpoints (slot, lsn, updated_at)
SELECT 'pgimageai', confirmed_flush_lsn, now() FROM pg_replication_slots WHERE slot_name = 'pgimageai'`)
	p := runDefaults(t, s)
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (1, $1)", pngImage(t, 1))
	waitResults(t, s, 1, "on the legacy slot")
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (2, $1)", pngImage(t, 2))
	runDefaults(t, s)
	waitResults(t, s, 2, "after the restart")
	if got := slotsOf(t, s); len(got) != 1 || got[0] != "pgimageai" {
		t.Fatalf("slots %v, want the legacy pgimageai alone", got)
	}
}

// TestUninstall: uninstall lists and refuses without --yes, refuses while a
// bridge runs, drops the slot and publication with --yes (the results and
// the schema stay), and the schema with --drop-schema (the target table the
// bridge created stays).
func TestUninstall(t *testing.T) {
	s := localSource(t)
	dropSlotsOf(t, s)
	p := runDefaults(t, s)
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (1, $1)", pngImage(t, 1))
	waitResults(t, s, 1, "before uninstalling")
	slot := slotsOf(t, s)[0]
	dsn := "--dsn=" + s.db.DSN()
	count := func(sql string) int { return queryInt(t, s.conn, sql) }
	published := func() int { return count("SELECT count(*) FROM pg_publication WHERE pubname = 'pgimageai'") }

	out, errOut, code := cli(t, nil, "uninstall", dsn, "--yes")
	if code != 1 || !strings.Contains(errOut, "stop it") || len(slotsOf(t, s)) != 1 || published() != 1 {
		t.Fatalf("uninstall beside a running bridge: exit %d, slots %v, publications %d\n%s%s", code, slotsOf(t, s), published(), out, errOut)
	}
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = cli(t, nil, "uninstall", dsn)
	if code != 2 || !strings.Contains(out, "slot "+slot+" (group default): would drop") || !strings.Contains(out, "publication pgimageai: would drop") ||
		!strings.Contains(errOut, "--yes") || len(slotsOf(t, s)) != 1 || published() != 1 {
		t.Fatalf("uninstall without --yes: exit %d, slots %v\n%s%s", code, slotsOf(t, s), out, errOut)
	}
	out, errOut, code = cli(t, nil, "uninstall", dsn, "--yes")
	if code != 0 || len(slotsOf(t, s)) != 0 || published() != 0 {
		t.Fatalf("uninstall --yes: exit %d, slots %v, publications %d\n%s%s", code, slotsOf(t, s), published(), out, errOut)
	}
	if n := count("SELECT count(*) FROM public.captions"); n != 1 || count("SELECT count(*) FROM pg_namespace WHERE nspname = 'pgimageai'") != 1 {
		t.Fatalf("uninstall without --drop-schema: %d captions, the schema gone?", n)
	}
	out, errOut, code = cli(t, nil, "uninstall", dsn, "--drop-schema", "--yes")
	if code != 0 || count("SELECT count(*) FROM pg_namespace WHERE nspname = 'pgimageai'") != 0 ||
		!strings.Contains(out, "target table public.captions (created by the bridge): kept") {
		t.Fatalf("uninstall --drop-schema --yes: exit %d\n%s%s", code, out, errOut)
	}
	if n := count("SELECT count(*) FROM public.captions"); n != 1 {
		t.Fatalf("the results table holds %d rows after --drop-schema, want 1", n)
	}
	// Run again, with nothing left to drop (no schema, no leaders table): it
	// says so and succeeds.
	out, errOut, code = cli(t, nil, "uninstall", dsn, "--drop-schema", "--yes")
	if code != 0 || !strings.Contains(out, "does not exist") {
		t.Fatalf("uninstall a second time: exit %d\n%s%s", code, out, errOut)
	}
	// Installed again from scratch, it works.
	if _, err := migrations.Apply(context.Background(), s.conn); err != nil {
		t.Fatal(err)
	}
}

// TestExitCodesAgainstServer: what the server refuses because of the
// settings exits 2; a server that cannot be reached exits 1.
func TestExitCodesAgainstServer(t *testing.T) {
	db := integration.NewDatabase(t)
	wrongPassword := strings.Replace(db.DSN(), "pgimageai-test", "wrong-password", 1)
	noDatabase := strings.Replace(db.DSN(), "/"+db.Name, "/no_such_database_x", 1)
	if wrongPassword == db.DSN() || noDatabase == db.DSN() {
		t.Fatalf("cannot derive DSNs from %s", db.Name)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"wrong password, status", []string{"status", "--dsn", wrongPassword}, 2, "password authentication failed"},
		{"wrong password, migrate", []string{"migrate", "--dsn", wrongPassword}, 2, "password authentication failed"},
		{"no such database, run", []string{"run", "--dsn", noDatabase}, 2, "does not exist"},
		{"no such database, errors", []string{"errors", "--dsn", noDatabase}, 2, "does not exist"},
		{"not migrated, status", []string{"status", "--dsn", db.DSN()}, 1, "pgimageai migrate"},
		{"unreachable, run", []string{"run", "--dsn", "postgres://u@127.0.0.1:1/db?connect_timeout=2"}, 1, "connection refused"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := cli(t, nil, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, want %d; stderr should say %q:\n%s%s", code, tc.code, tc.want, out, errOut)
			}
			if strings.Count(strings.TrimSpace(errOut), "\npgimageai ") > 0 {
				t.Fatalf("the error is written more than once:\n%s", errOut)
			}
			if strings.Contains(out+errOut, "wrong-password") || strings.Contains(out+errOut, "pgimageai-test") {
				t.Fatalf("a password was printed:\n%s%s", out, errOut)
			}
		})
	}
}

// TestLogValuesInSlogForm runs a bridge through inserts, an update, a
// delete, an invalid rule and a graceful stop, and reads its log: every
// value in slog's own form (no Go syntax such as map[id:42] or [a b]), no key
// twice on a line, one start-up line naming version, database, slot and
// group.
func TestLogValuesInSlogForm(t *testing.T) {
	s := localSource(t)
	dropSlotsOf(t, s)
	p := runDefaults(t, s)
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (1, $1), (2, $2)", pngImage(t, 1), pngImage(t, 2))
	waitResults(t, s, 2, "before the update")
	s.exec(t, "UPDATE public.photos SET img = $1 WHERE id = 1", pngImage(t, 3))
	s.exec(t, "DELETE FROM public.photos WHERE id = 2")
	s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('broken', 'public.photos', 'nope', 'AI_IMAGE_COMPLETE', 'here', 'x', 'public.more', 'c')`)
	integration.WaitFor(t, 30*time.Second, "the invalid rule to be reported", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE rule = 'broken' AND reason = 'invalid_rule'") == 1
	})
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p.log.Name())
	if err != nil {
		t.Fatal(err)
	}
	starts := 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		for _, bad := range []string{"=map[", "=[", "={", "=&{", "=0x"} {
			if strings.Contains(line, bad) {
				t.Errorf("a value in Go syntax (%s): %s", bad, line)
			}
		}
		seen := map[string]bool{}
		for _, f := range logKeys(line) {
			if seen[f] {
				t.Errorf("key %s twice: %s", f, line)
			}
			seen[f] = true
		}
		if strings.Contains(line, "msg=streaming ") {
			starts++
			for _, k := range []string{"version=", "database=" + s.db.Name, "slot=pgimageai_", "group=default", "rules=1"} {
				if !strings.Contains(line, k) {
					t.Errorf("the start-up line lacks %s: %s", k, line)
				}
			}
		}
	}
	if starts != 1 {
		t.Errorf("%d start-up lines, want 1:\n%s", starts, b)
	}
}

// logKeys are the keys of a slog text line (key=value pairs; quoted values
// skipped whole).
func logKeys(line string) []string {
	var keys []string
	for i := 0; i < len(line); {
		for i < len(line) && line[i] == ' ' {
			i++
		}
		j := i
		for j < len(line) && line[j] != '=' && line[j] != ' ' {
			j++
		}
		if j >= len(line) || line[j] != '=' {
			i = j + 1
			continue
		}
		keys = append(keys, line[i:j])
		j++
		if j < len(line) && line[j] == '"' {
			for j++; j < len(line) && line[j] != '"'; j++ {
				if line[j] == '\\' {
					j++
				}
			}
			j++
		}
		for j < len(line) && line[j] != ' ' {
			j++
		}
		i = j
	}
	return keys
}
