package integration_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/internal/pgerr"
	"github.com/pgimageai/pgimageai/magic"
)

// composeCommand returns the Compose of this machine: docker compose (v2) or
// docker-compose (Debian's 1.29); nil when there is none.
func composeCommand() []string {
	if exec.Command("docker", "compose", "version").Run() == nil {
		return []string{"docker", "compose"}
	}
	if p, err := exec.LookPath("docker-compose"); err == nil {
		return []string{p}
	}
	return nil
}

// TestComposeOffline starts compose.offline.yaml as a user would — the
// project's own images, no registry, the local provider — inserts a photo
// and reads its caption and embedding back. Under CI=true a machine without
// a Compose fails: the Docker machines of CI have Debian's docker-compose.
func TestComposeOffline(t *testing.T) {
	compose := composeCommand()
	if compose == nil {
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatal("no docker compose or docker-compose on this machine")
		}
		t.Skip("no docker compose or docker-compose on this machine") // ok-to-skip: outside CI only
	}
	free := func() int {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port
	}
	pgPort, metricsPort := free(), free()
	project := fmt.Sprintf("pgimageai_it_%d", time.Now().UnixNano()%1_000_000_000)
	pgImage := os.Getenv(integration.ImageEnv)
	if pgImage == "" {
		pgImage = "pgimageai-postgres:17"
	}
	appImage := os.Getenv(integration.AppImageEnv)
	if appImage == "" {
		appImage = integration.DefaultAppImage
	}
	env := append(os.Environ(), "PGIMAGEAI_POSTGRES_IMAGE="+pgImage, "PGIMAGEAI_IMAGE="+appImage,
		fmt.Sprintf("PGIMAGEAI_POSTGRES_PORT=%d", pgPort), fmt.Sprintf("PGIMAGEAI_METRICS_PORT=%d", metricsPort))
	run := func(args ...string) (string, error) {
		all := append(append(append([]string{}, compose[1:]...), "-p", project, "-f", "../compose.offline.yaml"), args...)
		cmd := exec.Command(compose[0], all...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		if out, err := run("down", "-v", "--remove-orphans"); err != nil {
			t.Errorf("compose down: %v\n%s", err, out)
		}
	})
	if out, err := run("up", "-d"); err != nil {
		t.Fatalf("compose up: %v\n%s", err, out)
	}
	ctx := context.Background()
	dsn := fmt.Sprintf("postgres://postgres:pgimageai@127.0.0.1:%d/postgres?sslmode=disable", pgPort)
	var conn *pgx.Conn
	integration.WaitFor(t, 90*time.Second, "the bridge to create its target tables", func() bool {
		if conn == nil {
			c, err := pgx.Connect(ctx, dsn)
			if err != nil {
				return false
			}
			conn = c
		}
		var n int
		err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename IN ('photo_captions', 'photo_embeddings')").Scan(&n)
		return err == nil && n == 2
	})
	defer conn.Close(ctx)
	img := pngImage(t, 1)
	if _, err := conn.Exec(ctx, "INSERT INTO public.photos (id, img) VALUES (1, $1)", img); err != nil {
		t.Fatal(err)
	}
	var caption string
	var dims int
	integration.WaitFor(t, 60*time.Second, "the caption and the embedding of photo 1", func() bool {
		return conn.QueryRow(ctx, `SELECT c.caption, array_length(e.embedding, 1) FROM public.photo_captions c
JOIN public.photo_embeddings e USING (id) WHERE id = 1`).Scan(&caption, &dims) == nil
	})
	if format, _ := magic.Detect(img); !strings.HasPrefix(caption, format.String()+" image") || dims < 16 {
		t.Errorf("caption %q, %d dimensions; want the local provider's description and vector", caption, dims)
	}
	if out, err := run("ps"); err != nil || !strings.Contains(out, "healthy") {
		t.Errorf("compose ps: the bridge is not healthy (%v):\n%s", err, out)
	}
	composeBridgeRole(ctx, t, conn, pgPort)
}

// composeBridgeRole: the bridge of the Compose file runs as pgimageai_bridge,
// a role that is no superuser, and every session of it — queries and the
// replication stream — is TLS; the role cannot connect without TLS.
func composeBridgeRole(ctx context.Context, t *testing.T, conn *pgx.Conn, pgPort int) {
	t.Helper()
	var super, createRole, createDB, bypassRLS, replication bool
	if err := conn.QueryRow(ctx, `SELECT rolsuper, rolcreaterole, rolcreatedb, rolbypassrls, rolreplication
FROM pg_roles WHERE rolname = 'pgimageai_bridge'`).Scan(&super, &createRole, &createDB, &bypassRLS, &replication); err != nil {
		t.Fatalf("the bridge's role: %v", err)
	}
	if super || createRole || createDB || bypassRLS || !replication {
		t.Errorf("pgimageai_bridge: superuser %v, createrole %v, createdb %v, bypassrls %v, replication %v; want only replication",
			super, createRole, createDB, bypassRLS, replication)
	}
	rows, err := conn.Query(ctx, `SELECT a.usename, a.backend_type, coalesce(s.ssl, false)
FROM pg_stat_activity a LEFT JOIN pg_stat_ssl s USING (pid) WHERE a.application_name = 'pgimageai'`)
	if err != nil {
		t.Fatal(err)
	}
	sessions, walsenders := 0, 0
	for rows.Next() {
		var user, backend string
		var ssl bool
		if err := rows.Scan(&user, &backend, &ssl); err != nil {
			t.Fatal(err)
		}
		sessions++
		if backend == "walsender" {
			walsenders++
		}
		if user != "pgimageai_bridge" || !ssl {
			t.Errorf("a session of the bridge (%s) runs as %q, TLS %v; want pgimageai_bridge over TLS", backend, user, ssl)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if sessions == 0 || walsenders == 0 {
		t.Errorf("%d sessions of the bridge, %d streaming; want its queries and its stream", sessions, walsenders)
	}
	for _, tt := range []struct {
		sslmode string
		refused bool
	}{{"disable", true}, {"require", false}} {
		dsn := fmt.Sprintf("postgres://pgimageai_bridge:pgimageai-bridge@127.0.0.1:%d/postgres?sslmode=%s", pgPort, tt.sslmode)
		c, err := pgx.Connect(ctx, dsn)
		if err == nil {
			c.Close(ctx)
		}
		// 28000 invalid_authorization_specification: pg_hba.conf's reject.
		if refused := pgerr.SQLState(err) == "28000"; refused != tt.refused || !tt.refused && err != nil {
			t.Errorf("pgimageai_bridge with sslmode=%s: %v; want refused %v", tt.sslmode, err, tt.refused)
		}
	}
}
