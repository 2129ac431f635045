package integration_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/magic"
)

// TestTLS turns TLS on in a server of its own (Debian's snake-oil
// certificate, which the test image has) and runs the bridge with
// sslmode=require: every connection it opens — the replication stream, the
// leader lock, the writer, the configuration — is encrypted, because all are
// opened from the DSN.
func TestTLS(t *testing.T) {
	pg := integration.StartPostgres(t)
	ctx := context.Background()
	for _, sql := range []string{
		"ALTER SYSTEM SET ssl_cert_file = '/etc/ssl/certs/ssl-cert-snakeoil.pem'",
		"ALTER SYSTEM SET ssl_key_file = '/etc/ssl/private/ssl-cert-snakeoil.key'",
		"ALTER SYSTEM SET ssl = on",
		"SELECT pg_reload_conf()",
	} {
		if err := pg.Exec(ctx, "postgres", sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	s := newSourceOn(t, pg.NewDatabase(t))
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")

	cfg := s.config(t)
	if !strings.Contains(cfg.SourceDSN, "sslmode=disable") {
		t.Fatalf("unexpected harness DSN %s", cfg.SourceDSN)
	}
	cfg.SourceDSN = strings.Replace(cfg.SourceDSN, "sslmode=disable", "sslmode=require", 1)
	// The server may take a moment to load the certificate after the reload.
	integration.WaitFor(t, 10*time.Second, "the server to accept TLS", func() bool {
		conn, err := pgx.Connect(ctx, cfg.SourceDSN)
		if err != nil {
			return false
		}
		conn.Close(ctx)
		return true
	})
	_, stop := s.start(t, cfg)
	img := pngImage(t, 1)
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (1, $1)", img)
	s.sync(t, 30*time.Second)
	assertCaptions(t, captions(t, s.conn), map[int]string{1: captionOf(magic.DataURL(magic.PNG, img))})

	// Every backend of the database but the test's own (sslmode=disable).
	var plain, all int
	var kinds []string
	err := s.conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE NOT ssl.ssl), count(*), array_agg(DISTINCT a.backend_type ORDER BY a.backend_type)
FROM pg_stat_activity a JOIN pg_stat_ssl ssl USING (pid)
WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()`).Scan(&plain, &all, &kinds)
	if err != nil {
		t.Fatal(err)
	}
	if plain != 0 || all < 3 || !strings.Contains(strings.Join(kinds, ","), "walsender") {
		t.Errorf("%d of the bridge's %d connections without TLS (backend types %v); want all encrypted, the walsender among them", plain, all, kinds)
	}
	t.Logf("%d bridge connections, all TLS: %v", all, kinds)
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
}
