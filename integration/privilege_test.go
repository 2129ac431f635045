package integration_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/state"
)

// readmeBlock returns the SQL between <!-- name:begin --> and <!-- name:end -->
// in docs/operations.md, without the code fence: the documented role is the
// one tested.
func readmeBlock(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	begin, end := "<!-- "+name+":begin -->", "<!-- "+name+":end -->"
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("docs/operations.md has no %s block", name)
	}
	block := strings.TrimSpace(s[i+len(begin) : j])
	block = strings.TrimPrefix(block, "```sql")
	return strings.TrimSuffix(block, "```")
}

// leastPrivilegeRole creates the documented least-privilege role for s
// (the docs' block, with s's publication) and drops it in t.Cleanup, handing
// what it owns back first. It returns the role and its password.
func leastPrivilegeRole(t *testing.T, s *source) (role, password string) {
	t.Helper()
	role = "lp_" + s.slot
	password = "pw-" + role
	sql := readmeBlock(t, "least-privilege")
	sql = strings.ReplaceAll(sql, "pgimageai_bridge", role)
	sql = strings.ReplaceAll(sql, "'change-me'", "'"+password+"'")
	sql = strings.ReplaceAll(sql, "CREATE PUBLICATION pgimageai ", "CREATE PUBLICATION "+s.slot+" ")
	if !strings.Contains(sql, "CREATE PUBLICATION "+s.slot) || !strings.Contains(sql, "REPLICATION") {
		t.Fatalf("unexpected least-privilege block:\n%s", sql)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		pg := s.db.Postgres()
		_ = pg.Exec(ctx, "postgres", "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role)
		// The role owns the targets it created: hand them back before the drop.
		_ = pg.Exec(ctx, s.db.Name, fmt.Sprintf("REASSIGN OWNED BY %[1]s TO postgres; DROP OWNED BY %[1]s", pgx.Identifier{role}.Sanitize()))
		if err := pg.Exec(ctx, "postgres", "DROP ROLE IF EXISTS "+pgx.Identifier{role}.Sanitize()); err != nil {
			t.Errorf("drop role: %v", err)
		}
	})
	s.exec(t, sql)
	return role, password
}

// TestLeastPrivilegeRole runs the documented least-privilege grant block and
// then the bridge as that role: it creates its slot and target, backfills
// existing rows, streams new ones, and writes errors and checkpoints.
func TestLeastPrivilegeRole(t *testing.T) {
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (1, $1), (2, 'not an image'::bytea)", pngImage(t, 1))

	role, password := leastPrivilegeRole(t, s)
	s.rule(t, "caption", "vision", "public.captions", "caption")

	cfg := s.config(t)
	u, err := url.Parse(cfg.SourceDSN)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, password)
	cfg.SourceDSN = u.String()
	cfg.Timing.RecheckInterval = 300 * time.Millisecond
	cfg.Timing.PaceReport = 300 * time.Millisecond
	_, stop := s.start(t, cfg)

	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (3, $1)", pngImage(t, 3))
	// The role's grants cover the models' pacing that status reads.
	integration.WaitFor(t, 30*time.Second, "the model's pacing stored by the role", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.model_pace WHERE slot = $1 AND model = 'vision'", s.slot) == 1
	})
	integration.WaitFor(t, 30*time.Second, "the lanes' pending changes stored by the role", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.lane_pending WHERE slot = $1", s.slot) >= 1
	})
	integration.WaitFor(t, 30*time.Second, "the backfill of rows 1 and 2", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.backfills WHERE rule = 'caption' AND state = 'done'") == 1
	})
	s.sync(t, 30*time.Second)

	// A rule on a table that is not in the publication: the role may not
	// add it, so that rule is invalid_rule with the owner's command, and the
	// others go on. Once the owner has added the table, the rule starts.
	s.exec(t, "CREATE TABLE public.albums (id int PRIMARY KEY, cover bytea)")
	s.exec(t, "INSERT INTO public.albums VALUES (1, $1)", pngImage(t, 11))
	s.exec(t, "GRANT SELECT ON public.albums TO "+pgx.Identifier{role}.Sanitize())
	s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('album', 'public.albums', 'cover', 'AI_IMAGE_COMPLETE', 'vision', 'p', 'public.album_captions', 'caption')`)
	var detail string
	integration.WaitFor(t, 30*time.Second, "the album rule to be invalid_rule", func() bool {
		return s.conn.QueryRow(context.Background(), `SELECT detail FROM pgimageai.errors WHERE rule = 'album' AND reason = 'invalid_rule' AND resolved_at IS NULL`).Scan(&detail) == nil
	})
	if !strings.Contains(detail, "ALTER PUBLICATION "+s.slot+" ADD TABLE public.albums") {
		t.Errorf("invalid_rule detail %q does not give the owner's command", detail)
	}
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (4, $1)", pngImage(t, 4))
	s.sync(t, 30*time.Second) // the other rule goes on
	s.exec(t, "ALTER PUBLICATION "+s.slot+" ADD TABLE public.albums")
	integration.WaitFor(t, 30*time.Second, "the album rule to start", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.backfills WHERE rule = 'album' AND state = 'done'") == 1
	})
	var album string
	if err := s.conn.QueryRow(context.Background(), "SELECT caption FROM public.album_captions WHERE id = 1").Scan(&album); err != nil || album != captionOf(magic.DataURL(magic.PNG, pngImage(t, 11))) {
		t.Errorf("album 1: %q (%v)", album, err)
	}
	// Deleting the rule leaves a table in the publication that the role may
	// not remove: harmless, the stream goes on.
	s.exec(t, "DELETE FROM pgimageai.rules WHERE name = 'album'")
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (5, $1)", pngImage(t, 5))
	s.sync(t, 30*time.Second)
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	got := captions(t, s.conn)
	want := map[int]string{1: captionOf(magic.DataURL(magic.PNG, pngImage(t, 1))), 2: "<NULL>"}
	for _, id := range []int{3, 4, 5} {
		want[id] = captionOf(magic.DataURL(magic.PNG, pngImage(t, id)))
	}
	assertCaptions(t, got, want)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE reason = 'unknown_format' AND source_key = '{\"id\": 2}'"); n != 1 {
		t.Errorf("%d unknown_format rows for id 2, want 1", n)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.checkpoints WHERE slot = $1", s.slot); n != 1 {
		t.Errorf("no checkpoint written by the role")
	}
	var owner string
	if err := s.conn.QueryRow(context.Background(), "SELECT tableowner FROM pg_tables WHERE schemaname = 'public' AND tablename = 'captions'").Scan(&owner); err != nil || owner != role {
		t.Errorf("target owner %q (%v), want the bridge role %s", owner, err, role)
	}
	var super bool
	if err := s.conn.QueryRow(context.Background(), "SELECT rolsuper FROM pg_roles WHERE rolname = $1", role).Scan(&super); err != nil || super {
		t.Fatalf("role superuser %v (%v)", super, err)
	}

	// The role's grants cover the retention of retry requests: noting
	// where they are, and deleting those the slot has passed.
	ctx := context.Background()
	s.exec(t, "INSERT INTO pgimageai.retry_requests (rule) VALUES ('caption')")
	s.exec(t, "UPDATE pgimageai.retention SET keep = '0' WHERE what = 'retry_requests'")
	asRole, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer asRole.Close(ctx)
	if _, err := state.PruneRetryRequests(ctx, asRole, s.slot); err != nil {
		t.Fatalf("retention of retry requests as the role: %v", err)
	}
	s.exec(t, "SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())", s.slot)
	if n, err := state.PruneRetryRequests(ctx, asRole, s.slot); err != nil || n != 1 {
		t.Errorf("retention of retry requests as the role deleted %d (%v), want 1", n, err)
	}
}
