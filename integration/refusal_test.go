package integration_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/integration"
)

// A target that cannot be written for a reason a retry will not cure never
// holds the slot: a privilege revoked makes the rule invalid_rule with the
// GRANT to run (and it backfills once granted); a delete that a constraint
// forbids becomes a target_refused errors row.

// TestLanePrivilegeRevoked runs the bridge as the documented least-privilege
// role on a target the user created and granted, then revokes the grant
// while rows stream.
func TestLanePrivilegeRevoked(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	role, password := leastPrivilegeRole(t, s)
	s.exec(t, "CREATE TABLE public.captions (id int PRIMARY KEY, caption text)")
	grant := "GRANT SELECT, INSERT, UPDATE, DELETE ON public.captions TO " + pgx.Identifier{role}.Sanitize()
	s.exec(t, grant)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	want := map[int]string{}
	insertRows(t, s, 1, 4, 3, want)

	cfg := s.config(t)
	u, err := url.Parse(cfg.SourceDSN)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, password)
	cfg.SourceDSN = u.String()
	cfg.Timing.RecheckInterval = 500 * time.Millisecond
	_, stop := s.start(t, cfg)
	integration.WaitFor(t, 30*time.Second, "3 captions", func() bool { return tableRows(t, s.conn, "public.captions") == 3 })

	s.exec(t, "REVOKE INSERT, UPDATE ON public.captions FROM "+pgx.Identifier{role}.Sanitize())
	insertRows(t, s, 4, 8, 2, want)
	// The slot goes past the rows the target refused: nothing holds it.
	s.sync(t, 30*time.Second)
	var detail string
	if err := s.conn.QueryRow(context.Background(), `SELECT detail FROM pgimageai.errors
WHERE rule = 'caption' AND reason = 'invalid_rule' AND resolved_at IS NULL`).Scan(&detail); err != nil {
		t.Fatalf("no open invalid_rule row after the revoke: %v", err)
	}
	wantGrant := "GRANT INSERT, UPDATE ON \"public\".\"captions\" TO " + pgx.Identifier{role}.Sanitize()
	if !strings.Contains(detail, wantGrant) {
		t.Errorf("invalid_rule detail %q lacks %q", detail, wantGrant)
	}

	// Granted again: the rule comes back by itself and backfills.
	s.exec(t, grant)
	integration.WaitFor(t, 30*time.Second, "7 captions after the grant", func() bool { return tableRows(t, s.conn, "public.captions") == 7 })
	s.sync(t, 30*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	assertCaptions(t, captions(t, s.conn), want)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE resolved_at IS NULL"); n != 0 {
		t.Errorf("%d open errors rows after the grant", n)
	}
}

// TestLaneDeleteRefused: another table's foreign key forbids deleting a
// target row. The delete becomes a target_refused errors row, the target
// row stays, and the rows after it land.
func TestLaneDeleteRefused(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	want := map[int]string{}
	insertRows(t, s, 1, 4, 3, want)
	_, stop := s.start(t, s.config(t))
	integration.WaitFor(t, 30*time.Second, "3 captions", func() bool { return tableRows(t, s.conn, "public.captions") == 3 })
	s.exec(t, "CREATE TABLE public.likes (caption_id int REFERENCES public.captions (id))")
	s.exec(t, "INSERT INTO public.likes VALUES (2)")

	s.exec(t, "DELETE FROM public.photos WHERE id IN (1, 2)")
	delete(want, 1)
	delete(want, 2) // the source row is gone; its target row stays, see below
	insertRows(t, s, 4, 6, 2, want)
	s.sync(t, 30*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got := captions(t, s.conn)
	if _, ok := got[2]; !ok {
		t.Error("the target row the foreign key holds was deleted")
	}
	delete(got, 2)
	assertCaptions(t, got, want)
	var reason, detail string
	err := s.conn.QueryRow(context.Background(), `SELECT reason, detail FROM pgimageai.errors
WHERE rule = 'caption' AND source_key = '{"id": 2}' AND resolved_at IS NULL`).Scan(&reason, &detail)
	if err != nil {
		t.Fatalf("no open errors row for the refused delete: %v", err)
	}
	if reason != "target_refused" || !strings.Contains(detail, "refused to delete the row") || !strings.Contains(detail, "23503") {
		t.Errorf("errors row %s: %q; want target_refused naming the delete and SQLSTATE 23503", reason, detail)
	}
}

// TestStatusLanePending: while a slow model holds a lane, status names what
// the lane holds and the age of the oldest change (pgimageai.lane_pending,
// stored by the leader); once written, nothing.
func TestStatusLanePending(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	ai := newFakeAI(t)
	release := make(chan struct{})
	ai.SetHook(func(http.ResponseWriter, *http.Request, aiRequest) bool { <-release; return false })
	s.model(t, "vision", ai, `{}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	cfg := s.config(t)
	cfg.Timing.PaceReport = 200 * time.Millisecond
	_, stop := s.start(t, cfg)
	want := map[int]string{}
	insertRows(t, s, 1, 3, 2, want)
	integration.WaitFor(t, 10*time.Second, "the lane's pending changes stored", func() bool {
		return queryInt(t, s.conn, `SELECT count(*) FROM pgimageai.lane_pending
WHERE slot = $1 AND lane = 'public.captions' AND pending = 2 AND now() - oldest_commit_time > interval '1 second'`, s.slot) == 1
	})
	env := []string{"PGIMAGEAI_DSN=" + s.db.DSN(), "PGIMAGEAI_SLOT=" + s.slot, "PGIMAGEAI_PUBLICATION=" + s.slot}
	wantCLI(t, env, 0, []string{"OLDEST PENDING", "public.captions"}, "status")
	out := wantCLI(t, env, 0, []string{`"pending": 2`, `"oldest_pending_seconds": `}, "status", "--format", "json")
	if strings.Contains(out, `"oldest_pending_seconds": null`) {
		t.Errorf("status JSON has no age of the oldest pending change:\n%s", out)
	}
	close(release)
	s.sync(t, 30*time.Second)
	integration.WaitFor(t, 10*time.Second, "nothing pending stored", func() bool {
		return queryInt(t, s.conn, `SELECT count(*) FROM pgimageai.lane_pending WHERE slot = $1 AND pending = 0 AND oldest_commit_time IS NULL`, s.slot) == 1
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	assertCaptions(t, captions(t, s.conn), want)
}
