package integration_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/migrations"
)

// TestFaultRuleChangeWhileTargetRefusesWrites adds a rule while the target
// database refuses writes: applying the change (creating the new target,
// reporting invalid rules) fails, and the bridge must retry it rather than
// stop; once the target takes writes again the new rule backfills and
// streams, and the old one has lost nothing.
func TestFaultRuleChangeWhileTargetRefusesWrites(t *testing.T) {
	s := newSource(t)
	tdb := integration.NewDatabase(t)
	tconn := tdb.Connect(t)
	ctx := t.Context()
	if _, err := migrations.Apply(ctx, tconn); err != nil {
		t.Fatal(err)
	}
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	cfg := s.config(t)
	cfg.TargetDSN = tdb.DSN()
	logs := captureLogs(t, &cfg)
	_, stop := s.start(t, cfg)
	img1, img2 := pngImage(t, 1), pngImage(t, 2)
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (1, $1)", img1)
	s.sync(t, 30*time.Second)

	readOnly := func(on bool) {
		t.Helper()
		sql := "ALTER DATABASE " + pgx.Identifier{tdb.Name}.Sanitize() + " RESET default_transaction_read_only"
		if on {
			sql = "ALTER DATABASE " + pgx.Identifier{tdb.Name}.Sanitize() + " SET default_transaction_read_only = on"
		}
		if err := tdb.Postgres().Exec(ctx, "postgres", sql); err != nil {
			t.Fatal(err)
		}
	}
	readOnly(true)
	// The bridge's sessions began writable: end them, so that it reconnects
	// into read-only ones.
	if err := tdb.Postgres().Exec(ctx, "postgres", `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, tdb.Name); err != nil {
		t.Fatal(err)
	}
	tconn = tdb.Connect(t) // the test's own session ended too
	s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('caption2', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'vision', 'Describe the image', 'public.captions2', 'caption')`)
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (2, $1)", img2)
	integration.WaitFor(t, 30*time.Second, "the bridge to retry the configuration change", func() bool {
		return strings.Count(logs.String(), "applying the configuration change at") >= 2
	})
	// Still running: its walsender still streams the slot.
	if n := queryInt(t, s.conn, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND active`, s.slot); n != 1 {
		t.Fatalf("the slot is not active while the target refuses writes: the bridge stopped")
	}

	readOnly(false)
	t0 := time.Now()
	s.sync(t, 60*time.Second)
	integration.WaitFor(t, 30*time.Second, "the new rule's backfill", func() bool {
		return queryInt(t, tconn, "SELECT count(*) FROM pgimageai.backfills WHERE rule = 'caption2' AND state = 'done'") == 1
	})
	t.Logf("caught up %s after the target took writes again", time.Since(t0).Round(time.Millisecond))
	want := map[int]string{1: captionOf(magic.DataURL(magic.PNG, img1)), 2: captionOf(magic.DataURL(magic.PNG, img2))}
	assertCaptions(t, captions(t, tconn), want)
	for id, w := range want {
		var got string
		if err := tconn.QueryRow(ctx, "SELECT caption FROM public.captions2 WHERE id = $1", id).Scan(&got); err != nil || got != w {
			t.Errorf("captions2 row %d: %q (%v), want %q", id, got, err, w)
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
}
