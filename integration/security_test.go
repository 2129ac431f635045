package integration_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/magic"
)

// attacker creates a non-superuser role that owns only public.photos (SPEC
// §5b: a role that may only write a source table) and returns a connection
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
	waitFor(t, 30*time.Second, "the operator's retry", func() bool { return ai.Count()-before == 2 })
	if err := stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
}
