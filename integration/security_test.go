package integration_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/magic"
)

// attacker creates a non-superuser role that owns only public.photos
// (a role that may only write a source table) and returns a connection
// as that role.
func attacker(t *testing.T, s *source) *pgx.Conn {
	t.Helper()
	role := "attacker_" + s.slot
	password := "pw-" + role
	id := pgx.Identifier{role}.Sanitize()
	s.exec(t, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", id, password))
	s.exec(t, "ALTER TABLE public.photos OWNER TO "+id)
	s.exec(t, fmt.Sprintf("GRANT USAGE ON SCHEMA pgimageai TO %s", id)) // it may even see the schema
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		pg := s.db.Postgres()
		_ = pg.Exec(ctx, "postgres", "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role)
		_ = pg.Exec(ctx, s.db.Name, fmt.Sprintf("REASSIGN OWNED BY %[1]s TO postgres; DROP OWNED BY %[1]s", id))
		_ = pg.Exec(ctx, "postgres", "DROP ROLE IF EXISTS "+id)
	})
	u, err := url.Parse(s.db.DSN())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, password)
	conn, err := pgx.Connect(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestControlIsAPrivilege: a role that owns only a source table cannot hide
// its change from the bridge with a forged "own writes" message, cannot make
// the bridge pay for retries with a forged retry message or request, and
// cannot steer a backfill with a forged page marker.
func TestControlIsAPrivilege(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	ai := newFakeAI(t)
	ai.Set(0, func(r aiRequest) (int, string) {
		if r.DataURL == magic.DataURL(magic.PNG, pngImage(t, 99)) {
			return http.StatusBadRequest, "refused"
		}
		return 200, captionOf(r.DataURL)
	})
	s.model(t, "vision", ai, `{}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	evil := attacker(t, s)
	_, stop := s.start(t, s.config(t))
	ctx := context.Background()
	s.exec(t, `INSERT INTO public.photos (id, img) VALUES (1, $1), (2, $2)`, pngImage(t, 1), pngImage(t, 99))
	s.sync(t, 30*time.Second)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE resolved_at IS NULL AND reason = 'provider_error'"); n != 1 {
		t.Fatalf("%d open provider errors, want 1 (row 2)", n)
	}
	before := ai.Count()

	// 1. The forged "own writes" message in the same transaction as an
	// UPDATE: the update is captioned all the same.
	err := pgx.BeginFunc(ctx, evil, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_logical_emit_message(true, 'pgimageai.own', '')"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "UPDATE public.photos SET img = $1 WHERE id = 1", pngImage(t, 2))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// 2. A forged retry message, and a forged backfill page marker.
	for _, m := range [][2]string{{"pgimageai.retry", "{}"}, {"pgimageai.backfill", `{"page":"caption/0/1"}`}} {
		if _, err := evil.Exec(ctx, "SELECT pg_logical_emit_message(true, $1, $2::text)", m[0], m[1]); err != nil {
			t.Fatal(err)
		}
	}
	// 3. A retry request row: refused, the role has no INSERT on it.
	if _, err := evil.Exec(ctx, "INSERT INTO pgimageai.retry_requests (rule) VALUES ('caption')"); err == nil {
		t.Error("the attacker inserted a retry request")
	}
	s.sync(t, 30*time.Second)
	if got, want := captions(t, s.conn)[1], captionOf(magic.DataURL(magic.PNG, pngImage(t, 2))); got != want {
		t.Errorf("row 1 caption %q after the forged own-writes message, want %q: the update was hidden", got, want)
	}
	if n := ai.Count() - before; n != 1 {
		t.Errorf("%d provider requests after the forgeries, want 1 (the update of row 1; no retry of row 2)", n)
	}
	// An operator's retry still works.
	runCLI(t, s, "retry", "--rule", "caption")
	integration.WaitFor(t, 30*time.Second, "the operator's retry", func() bool { return ai.Count()-before == 2 })
	if err := stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
}

// TestReadsBoundedByBytes: a backfill and a retry over 40 images of 1 MiB
// read them in pages cut by bytes (16 MiB) as well as rows, and an image over
// max_image_bytes is never fetched: it is a too_large row with its length
// and head, again on retry, without a call.
func TestReadsBoundedByBytes(t *testing.T) {
	s := newSource(t)
	ai := newFakeAI(t)
	ai.Set(0, func(aiRequest) (int, string) { return http.StatusBadRequest, "refused" })
	s.model(t, "vision", ai, `{"max_image_bytes": 2097152}`)
	const mib = 1 << 20
	s.exec(t, fmt.Sprintf(`INSERT INTO public.photos (id, img)
SELECT i, '\x89504e470d0a1a0a'::bytea || decode(repeat(md5(i::text), %d), 'hex') FROM generate_series(1, 40) AS i`, mib/16))
	s.exec(t, fmt.Sprintf(`INSERT INTO public.photos (id, img)
VALUES (41, '\x89504e470d0a1a0a'::bytea || decode(repeat(md5('big'), %d), 'hex'))`, 3*mib/16))
	_, stop := s.start(t, s.config(t))
	s.rule(t, "caption", "vision", "public.captions", "caption")
	integration.WaitFor(t, 60*time.Second, "the backfill", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.backfills WHERE rule = 'caption' AND state = 'done' AND rows_done = 41") == 1
	})
	s.sync(t, 30*time.Second)
	if n := ai.Count(); n != 40 {
		t.Errorf("%d requests for 40 images within max_image_bytes, want 40", n)
	}
	tooLarge := func(attempts int) {
		t.Helper()
		if n := queryInt(t, s.conn, `SELECT count(*) FROM pgimageai.errors WHERE reason = 'too_large' AND resolved_at IS NULL
AND source_key = '{"id": 41}' AND image_bytes = $1 AND substring(image_head FROM 1 FOR 8) = '\x89504e470d0a1a0a'::bytea AND attempts = $2`,
			8+3*mib, attempts); n != 1 {
			t.Errorf("want one open too_large row for id 41 with its length, head and %d attempts", attempts)
		}
	}
	tooLarge(1)
	ai.Set(0, nil)
	runCLI(t, s, "retry", "--rule", "caption")
	integration.WaitFor(t, 60*time.Second, "the retry", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM public.captions WHERE caption LIKE 'caption:%'") == 40
	})
	s.sync(t, 30*time.Second)
	if n := ai.Count(); n != 80 {
		t.Errorf("%d requests after the retry, want 80 (40 again; the too large one never)", n)
	}
	tooLarge(2)
	if err := stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
}
