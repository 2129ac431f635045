package integration_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ory/dockertest/v3/docker"

	"github.com/pgimageai/pgimageai/integration"
)

// TestImage runs pgimageai's own image (scripts/build-image.sh: the binary and the
// libraries it loads, no base image) beside the test PostgreSQL: it streams one change end to end with the
// offline local provider, runs as the non-root user with a CA bundle, answers its health
// checks, and stops gracefully on SIGTERM (exit 0, the "stopped" line in its log).
func TestImage(t *testing.T) {
	ctx := context.Background()
	s := newSource(t)
	s.exec(t, `INSERT INTO pgimageai.models (name, provider, model) VALUES ('pixels', 'local', 'any')`)
	s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('describe', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'pixels', 'Describe', 'public.captions', 'caption')`)
	dsn, network, err := s.db.NetworkDSN(ctx)
	if err != nil {
		t.Fatal(err)
	}
	app := integration.StartApp(t, network, []string{
		"PGIMAGEAI_DSN=" + dsn, "PGIMAGEAI_SLOT=" + s.slot, "PGIMAGEAI_PUBLICATION=" + s.slot,
	}, nil) // the image's default command: run

	exited := make(chan error)
	go func() {
		for app.Running(ctx) {
			time.Sleep(200 * time.Millisecond)
		}
		close(exited)
	}()
	s.waitStreaming(t, exited)
	waitHealth(t, app.MetricsURL(), 20*time.Second, http.StatusOK, "streaming")

	s.exec(t, `INSERT INTO public.photos (id, img) VALUES (1, $1)`, pngImage(t, 1))
	var caption string
	integration.WaitFor(t, 60*time.Second, "the caption of row 1", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename = 'captions'") == 1 &&
			s.conn.QueryRow(ctx, "SELECT caption FROM public.captions WHERE id = 1").Scan(&caption) == nil
	})
	if !strings.HasPrefix(caption, "PNG image, 8x8 pixels") {
		t.Errorf("caption %q, want the local provider's description of an 8x8 PNG", caption)
	}

	c, err := app.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Config.User != "65532:65532" {
		t.Errorf("the image runs as %q, want the non-root 65532:65532", c.Config.User)
	}
	if n := queryInt(t, s.conn, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'pgimageai' AND backend_type = 'walsender'`); n != 1 {
		t.Errorf("%d walsenders named pgimageai, want 1", n)
	}
	if ca := tarFile(t, app, "/etc/ssl/certs/ca-certificates.crt"); !bytes.Contains(ca, []byte("-----BEGIN CERTIFICATE-----")) {
		t.Errorf("the image's CA bundle holds no certificate (%d bytes)", len(ca))
	}

	// The image backend: libvips reads JPEG, HEIF and AVIF in the image (libvips.so.42, its
	// HEIF module and libheif's decoders are there: --version opens it, and a HEIC and an
	// AVIF are decoded when it starts), unless the image was built with
	// PGIMAGEAI_IMAGE_BACKEND=go. The binary opens libvips at run time, so a library
	// missing from the image would show only here: as "pure Go … (no libvips: …)".
	wantBackend := []string{"images: libvips", "JPEG, HEIF, AVIF"}
	if os.Getenv("PGIMAGEAI_IMAGE_BACKEND") == "go" {
		wantBackend = []string{"images: pure Go and WebAssembly (libheif, libavif)"}
	}
	if code, out, err := app.Exec(ctx, "/usr/local/bin/pgimageai", "--version"); err != nil || code != 0 ||
		!strings.Contains(out, wantBackend[0]) || !strings.Contains(out, wantBackend[len(wantBackend)-1]) {
		t.Errorf("pgimageai --version in the container: exit %d, %v: %q, want %q", code, err, out, wantBackend)
	}

	// The image's health check: pgimageai health, run inside the container (no curl).
	for _, probe := range []string{"ready", "live", "leader"} {
		code, out, err := app.Exec(ctx, "/usr/local/bin/pgimageai", "health", "--probe", probe)
		if err != nil || code != 0 || !strings.Contains(out, `"state"`) {
			t.Errorf("pgimageai health --probe %s in the container: exit %d, %v: %s", probe, code, err, out)
		}
	}
	if code, state := probe(t, app.MetricsURL(), "/readyz"); code != http.StatusOK || state != "streaming" {
		t.Errorf("/readyz %d %s, want 200 streaming", code, state)
	}
	m := scrape(t, app.MetricsURL())
	if m[`pgimageai_slot_wal_status{slot="`+s.slot+`",wal_status="reserved"}`] != 1 || m[`pgimageai_slot_active{slot="`+s.slot+`"}`] != 1 {
		t.Errorf("slot metrics: wal_status reserved %v, active %v; want 1 and 1",
			m[`pgimageai_slot_wal_status{slot="`+s.slot+`",wal_status="reserved"}`], m[`pgimageai_slot_active{slot="`+s.slot+`"}`])
	}

	start := time.Now()
	if err := app.Signal(ctx, docker.SIGTERM); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	code, err := app.Wait(wctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("exit %d %s after SIGTERM", code, time.Since(start).Round(time.Millisecond))
	if code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	if logs := app.Logs(ctx); !strings.Contains(logs, "msg=stopped") {
		t.Errorf("no graceful stop line (msg=stopped) in the container log:\n%s", logs)
	}
}

// tarFile reads one file from the container.
func tarFile(t testing.TB, app *integration.App, path string) []byte {
	t.Helper()
	raw, err := app.File(context.Background(), path)
	if err != nil {
		t.Fatalf("read %s from the container: %v", path, err)
	}
	tr := tar.NewReader(bytes.NewReader(raw))
	if _, err := tr.Next(); err != nil {
		t.Fatalf("read %s from the container: %v", path, err)
	}
	b, err := io.ReadAll(io.LimitReader(tr, 4<<20))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
