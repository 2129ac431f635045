package integration_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"image"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge"
	"github.com/pgimageai/pgimageai/integration"
)

// The hostile-role suite: roles below the bridge's privileges — one with
// CREATE on public, the owner of a source table, a role that only connects
// — try to make the bridge's role (the documented least-privilege role,
// which holds REPLICATION) run code of theirs. Each test asserts that their
// side-effect table stays empty and that the bridge keeps streaming the
// other rules.

// roleDSN returns s's DSN for role with password.
func roleDSN(t testing.TB, s *source, role, password string) string {
	t.Helper()
	return integration.WithUser(t, s.db.DSN(), role, password)
}

// hostileRole creates a login role of its own for s, dropped (with what it
// owns) in t.Cleanup, and returns a connection as that role.
func hostileRole(t *testing.T, s *source, suffix, grants string) (role string, conn *pgx.Conn) {
	t.Helper()
	role = suffix + "_" + s.slot
	q := pgx.Identifier{role}.Sanitize()
	s.exec(t, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD 'pw'", q))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		pg := s.db.Postgres()
		_ = pg.Exec(ctx, "postgres", "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role)
		_ = pg.Exec(ctx, s.db.Name, fmt.Sprintf("DROP OWNED BY %s CASCADE", q))
		_ = pg.Exec(ctx, "postgres", "DROP ROLE IF EXISTS "+q)
	})
	if grants != "" {
		s.exec(t, strings.ReplaceAll(grants, "%s", q))
	}
	conn, err := pgx.Connect(context.Background(), roleDSN(t, s, role, "pw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return role, conn
}

// execAs runs sql on conn and fails the test on error.
func execAs(t testing.TB, conn *pgx.Conn, sql string) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// spied returns what the hostile role's functions logged: who ran what.
func spied(t testing.TB, s *source) []string {
	t.Helper()
	rows, err := s.conn.Query(context.Background(), "SELECT what || ' as ' || who FROM public.spy_log ORDER BY at")
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// spyLog is the side-effect table of every hostile function, writable by
// every role.
const spyLog = `CREATE TABLE public.spy_log (what text, who text, at timestamptz DEFAULT clock_timestamp());
GRANT INSERT, SELECT ON public.spy_log TO PUBLIC;`

// noisePNG is a PNG of side×side random pixels: tens of KB that do not
// compress, stored out of line, so an UPDATE of another column sends it as
// unchanged TOAST.
func noisePNG(t testing.TB, side int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, side, side))
	if _, err := rand.Read(img.Pix); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// asRole returns cfg connecting as role.
func asRole(t testing.TB, s *source, cfg bridge.Config, role, password string) bridge.Config {
	cfg.SourceDSN = roleDSN(t, s, role, password)
	cfg.Timing.RecheckInterval = 300 * time.Millisecond
	return cfg
}

// TestHostileSearchPath: a role with CREATE on public defines functions
// there whose argument types match the product's calls better than
// pg_catalog's — format(text, name, name) (the catalog's table lookup),
// to_jsonb(pg_replication_slots) (slot reads), to_jsonb(pg_publication_rel)
// (the publication's sync, whose call is left unqualified: only the
// session's search_path protects it), jsonb_populate_record and
// jsonb_populate_recordset(photos, jsonb) (backfill pages, retries, the
// re-read of unchanged TOAST values, slot recovery) — each logging who ran
// it. The bridge runs as the least-privilege role through a backfill,
// streamed rows, an UPDATE that leaves the image as unchanged TOAST, a
// retry, and status as a superuser: none of them runs.
func TestHostileSearchPath(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	s.exec(t, spyLog)
	_, mallory := hostileRole(t, s, "mallory", "GRANT CREATE ON SCHEMA public TO %s")
	execAs(t, mallory, `
CREATE FUNCTION public.format(text, name, name) RETURNS text LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.spy_log (what, who) VALUES ('format', current_user); RETURN pg_catalog.format($1, $2, $3); END $$;
CREATE FUNCTION public.to_jsonb(pg_catalog.pg_replication_slots) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.spy_log (what, who) VALUES ('to_jsonb', current_user); RETURN pg_catalog.to_jsonb($1); END $$;
CREATE FUNCTION public.to_jsonb(pg_catalog.pg_publication_rel) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.spy_log (what, who) VALUES ('to_jsonb', current_user); RETURN pg_catalog.to_jsonb($1); END $$;
CREATE FUNCTION public.jsonb_populate_record(public.photos, jsonb) RETURNS public.photos LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.spy_log (what, who) VALUES ('jsonb_populate_record', current_user); RETURN pg_catalog.jsonb_populate_record($1, $2); END $$;
CREATE FUNCTION public.jsonb_populate_recordset(public.photos, jsonb) RETURNS SETOF public.photos LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.spy_log (what, who) VALUES ('jsonb_populate_recordset', current_user);
  RETURN QUERY SELECT * FROM pg_catalog.jsonb_populate_recordset($1, $2); END $$;`)
	// The hijack would take these calls today: prove it, so that the test
	// shows what it stops.
	if _, err := s.conn.Exec(context.Background(), "SELECT format('%I.%I', 'a'::name, 'b'::name)"); err != nil {
		t.Fatal(err)
	}
	if got := spied(t, s); len(got) != 1 {
		t.Fatalf("the planted format() does not take an unqualified call: %v", got)
	}
	s.exec(t, "TRUNCATE public.spy_log")

	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.exec(t, "INSERT INTO public.photos (id, img, note) VALUES (1, $1, 'one'), (2, 'not an image'::bytea, 'two'), (3, $2, 'three')",
		pngImage(t, 1), noisePNG(t, 100))
	role, password := leastPrivilegeRole(t, s)
	s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('caption', 'photos', 'img', 'AI_IMAGE_COMPLETE', 'vision', 'Describe {{note}}', 'captions', 'caption')`)
	cfg := asRole(t, s, s.config(t), role, password)
	_, stop := s.start(t, cfg)
	integration.WaitFor(t, 30*time.Second, "the backfill", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.backfills WHERE rule = 'caption' AND state = 'done'") == 1
	})
	s.exec(t, "INSERT INTO public.photos (id, img, note) VALUES (4, $1, 'four')", pngImage(t, 4))
	requests := ai.Count()
	s.exec(t, "UPDATE public.photos SET note = 'three again' WHERE id = 3") // the image arrives as unchanged TOAST
	s.exec(t, "INSERT INTO pgimageai.retry_requests (rule) VALUES ('caption')")
	s.sync(t, 30*time.Second)
	if ai.Count() == requests {
		t.Error("the UPDATE of row 3's prompt column made no call: its image was not re-read")
	}
	stdout, stderr, code := cli(t, nil, "status", "--dsn", s.db.DSN(), "--slot", s.slot)
	if code != 0 {
		t.Errorf("status: exit %d\n%s%s", code, stdout, stderr)
	}
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	if got := spied(t, s); len(got) > 0 {
		t.Errorf("the bridge or status ran functions planted in public: %v", got)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.captions WHERE caption IS NOT NULL"); n != 3 {
		t.Errorf("%d captions, want 3 (rows 1, 3 and 4)", n)
	}
}

// TestHostileTableOwner: the owner of source tables tries to make the
// bridge run its code: a restrictive row-level security policy TO the
// bridge's role USING (spy()), a trigger on a write-back table, a domain
// whose check calls spy(). Each rule is an invalid_rule naming what to do;
// the spy never runs as the bridge's role; the other rule keeps streaming.
func TestHostileTableOwner(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	s.exec(t, spyLog)
	role, password := leastPrivilegeRole(t, s)
	bridgeRole := pgx.Identifier{role}.Sanitize()
	_, owner := hostileRole(t, s, "owner", "GRANT CREATE ON SCHEMA public TO %s")
	execAs(t, owner, fmt.Sprintf(`
CREATE FUNCTION public.spy() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.spy_log (what, who) VALUES ('policy', current_user); RETURN true; END $$;
CREATE FUNCTION public.spy_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.spy_log (what, who) VALUES ('trigger', current_user); RETURN NEW; END $$;
CREATE FUNCTION public.spy_check(text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.spy_log (what, who) VALUES ('domain', current_user); RETURN true; END $$;
CREATE DOMAIN public.spy_text AS text CHECK (public.spy_check(VALUE));

CREATE TABLE public.policed (id int PRIMARY KEY, img bytea);
ALTER TABLE public.policed ENABLE ROW LEVEL SECURITY;
CREATE POLICY visible ON public.policed TO %[1]s USING (true);
CREATE POLICY spying ON public.policed AS RESTRICTIVE TO %[1]s USING (public.spy());
CREATE TABLE public.triggered (id int PRIMARY KEY, img bytea, caption text);
CREATE TRIGGER spying BEFORE UPDATE ON public.triggered FOR EACH ROW EXECUTE FUNCTION public.spy_trigger();
CREATE TABLE public.domained (id int PRIMARY KEY, img bytea, tag public.spy_text);
GRANT SELECT ON public.policed, public.domained TO %[1]s;
GRANT SELECT, UPDATE ON public.triggered TO %[1]s;`, bridgeRole))
	s.exec(t, "ALTER PUBLICATION "+pgx.Identifier{s.slot}.Sanitize()+" ADD TABLE public.policed, public.triggered, public.domained")
	for _, table := range []string{"policed", "triggered", "domained"} {
		s.exec(t, fmt.Sprintf("INSERT INTO public.%s (id, img) VALUES (1, $1)", table), pngImage(t, 1))
	}
	s.exec(t, "TRUNCATE public.spy_log") // what the inserts checked, as the superuser

	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	add := func(name, source, target, column string) {
		s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ($1, $2, 'img', 'AI_IMAGE_COMPLETE', 'vision', 'p', $3, $4)`, name, source, target, column)
	}
	add("policed", "public.policed", "public.policed_captions", "caption")
	add("triggered", "public.triggered", "public.triggered", "caption")
	add("domained", "public.domained", "public.domained_captions", "caption")

	cfg := asRole(t, s, s.config(t), role, password)
	_, stop := s.start(t, cfg)
	want := map[string][]string{
		"policed":   {"row-level security", "BYPASSRLS"},
		"triggered": {"trigger spying on public.triggered", "--trust-tables public.triggered"},
		"domained":  {"domain public.spy_text (function public.spy_check(text))", "--trust-tables public.domained"},
	}
	for rule, parts := range want {
		integration.WaitFor(t, 30*time.Second, "rule "+rule+" to be invalid_rule", func() bool {
			return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE rule = $1 AND reason = 'invalid_rule' AND resolved_at IS NULL", rule) == 1
		})
		if detail, ok := openInvalidRule(t, s, rule); ok {
			for _, p := range parts {
				if !strings.Contains(detail, p) {
					t.Errorf("rule %s: invalid_rule detail %q does not say %q", rule, detail, p)
				}
			}
		}
	}
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (7, $1)", pngImage(t, 7))
	s.sync(t, 30*time.Second)
	if got := captions(t, s.conn); len(got) != 1 || got[7] == "" || got[7] == "<NULL>" {
		t.Errorf("the valid rule's captions: %v, want row 7's", got)
	}
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	if got := spied(t, s); len(got) > 0 {
		t.Errorf("the table owner's code ran: %v", got)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.triggered WHERE caption IS NOT NULL"); n != 0 {
		t.Errorf("the write-back table with a trigger got %d results", n)
	}
}

// TestHostileLeaderSquatter: a role that can only connect holds the
// advisory key that the leader lock used to be before the bridge starts:
// the bridge leads all the same (it would wait as a standby for ever),
// logs the squatter, and status shows it.
func TestHostileLeaderSquatter(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	_, squatter := hostileRole(t, s, "squatter", "")
	var ok bool
	if err := squatter.QueryRow(context.Background(), "SELECT pg_try_advisory_lock(hashtext('pgimageai.leader'), hashtext($1))", s.slot).Scan(&ok); err != nil || !ok {
		t.Fatalf("squat: %v, %v", ok, err)
	}
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	role, password := leastPrivilegeRole(t, s)
	cfg := asRole(t, s, s.config(t), role, password)
	logs := captureLogs(t, &cfg)
	_, stop := s.start(t, cfg)
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (1, $1)", pngImage(t, 1))
	s.sync(t, 30*time.Second)
	pid := squatter.PgConn().PID()
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, fmt.Sprintf("squatter_pid=%d", pid)) {
		t.Errorf("no warning naming the squatter's pid %d", pid)
	}
	stdout, stderr, code := cli(t, nil, "status", "--dsn", s.db.DSN(), "--slot", s.slot)
	if code != 0 || !strings.Contains(stdout, fmt.Sprintf("pid %d, role squatter_", pid)) {
		t.Errorf("status does not show the squatter (exit %d):\n%s%s", code, stdout, stderr)
	}
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	if got := captions(t, s.conn); len(got) != 1 {
		t.Errorf("captions %v, want row 1's", got)
	}
}

// TestHostilePromptValues: a writer of the source puts a huge value in a
// column that a rule's prompt template names, in a row that exists before
// the rule (backfill) and in one streamed after: neither is sent, each is a
// too_large errors row naming max_prompt_bytes, and a row with a short value
// beside them gets its caption.
func TestHostilePromptValues(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{"max_prompt_bytes": 1000}`)
	huge := strings.Repeat("x", 3<<20)
	s.exec(t, "INSERT INTO public.photos (id, img, note) VALUES (1, $1, $2)", pngImage(t, 1), huge)
	s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('caption', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'vision', 'Describe {{note}}', 'public.captions', 'caption')`)
	_, stop := s.start(t, s.config(t))
	s.exec(t, "INSERT INTO public.photos (id, img, note) VALUES (2, $1, $2), (3, $3, 'short')", pngImage(t, 2), huge, pngImage(t, 3))
	s.sync(t, 30*time.Second)
	integration.WaitFor(t, 30*time.Second, "the backfill", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.backfills WHERE rule = 'caption' AND state = 'done'") == 1
	})
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	for _, id := range []int{1, 2} {
		var detail string
		err := s.conn.QueryRow(context.Background(), `SELECT detail FROM pgimageai.errors
WHERE rule = 'caption' AND source_key = jsonb_build_object('id', $1::int) AND reason = 'too_large' AND resolved_at IS NULL`, id).Scan(&detail)
		if err != nil || !strings.Contains(detail, "max_prompt_bytes 1000") {
			t.Errorf("row %d: too_large row %q (%v), want one naming max_prompt_bytes", id, detail, err)
		}
	}
	for _, r := range ai.Requests() {
		if len(r.Prompt) > 1000 {
			t.Errorf("a prompt of %d bytes was sent", len(r.Prompt))
		}
	}
	if n := ai.Count(); n != 1 {
		t.Errorf("%d requests, want 1 (row 3)", n)
	}
	if got := captions(t, s.conn); got[3] == "" || got[3] == "<NULL>" {
		t.Errorf("row 3's caption: %q", got[3])
	}
}

// TestTrustTables: the operator trusts one write-back table's owner
// (--trust-tables): its rule runs and its trigger fires. Another write-back
// table gains a trigger after its rule was checked: the next write of its
// results fails before any UPDATE, the rule becomes an invalid_rule naming
// the trigger, and the trigger never runs.
func TestTrustTables(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	s.exec(t, spyLog+`
CREATE FUNCTION public.spy_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.spy_log (what, who) VALUES (TG_TABLE_NAME, current_user); RETURN NEW; END $$;
CREATE TABLE public.trusted (id int PRIMARY KEY, img bytea, caption text);
CREATE TRIGGER audit BEFORE UPDATE ON public.trusted FOR EACH ROW EXECUTE FUNCTION public.spy_trigger();
CREATE TABLE public.later (id int PRIMARY KEY, img bytea, caption text);`)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	for _, table := range []string{"trusted", "later"} {
		s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ($1, $2, 'img', 'AI_IMAGE_COMPLETE', 'vision', 'p', $2, 'caption')`, table, "public."+table)
	}
	cfg := s.config(t)
	cfg.Trust.Tables = []string{"trusted"} // a bare name: public's
	cfg.Timing.RecheckInterval = 300 * time.Millisecond
	_, stop := s.start(t, cfg)
	s.exec(t, "INSERT INTO public.trusted (id, img) VALUES (1, $1)", pngImage(t, 1))
	s.exec(t, "INSERT INTO public.later (id, img) VALUES (1, $1)", pngImage(t, 2))
	s.sync(t, 30*time.Second)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.later WHERE caption IS NOT NULL"); n != 1 {
		t.Fatalf("later: %d captions before its trigger, want 1", n)
	}
	s.exec(t, "CREATE TRIGGER audit BEFORE UPDATE ON public.later FOR EACH ROW EXECUTE FUNCTION public.spy_trigger()")
	s.exec(t, "INSERT INTO public.later (id, img) VALUES (2, $1)", pngImage(t, 3))
	integration.WaitFor(t, 30*time.Second, "rule later to be invalid_rule", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE rule = 'later' AND reason = 'invalid_rule' AND resolved_at IS NULL") == 1
	})
	if detail, ok := openInvalidRule(t, s, "later"); ok && !strings.Contains(detail, "trigger audit on public.later") {
		t.Errorf("invalid_rule detail %q does not name the trigger", detail)
	}
	s.exec(t, "INSERT INTO public.trusted (id, img) VALUES (2, $1)", pngImage(t, 4))
	s.sync(t, 30*time.Second)
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.trusted WHERE caption IS NOT NULL"); n != 2 {
		t.Errorf("trusted: %d captions, want 2", n)
	}
	got := spied(t, s)
	for _, g := range got {
		if strings.HasPrefix(g, "later") {
			t.Errorf("the trigger added to later ran: %v", got)
		}
	}
	if len(got) < 2 {
		t.Errorf("the trusted table's trigger ran %d times, want 2 at least: %v", len(got), got)
	}
}
