package integration_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/integration"
)

// TestCLIMigrateWarns: migrate succeeds for a role that may create the
// schema but not stream (no REPLICATION attribute), and says at once what
// pgimageai run would fail on, instead of leaving it to run.
func TestCLIMigrateWarns(t *testing.T) {
	db := integration.NewDatabase(t)
	ctx := context.Background()
	role := "mig_" + db.Name
	if len(role) > 63 {
		role = role[:63]
	}
	admin := db.Connect(t)
	if _, err := admin.Exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD 'pw'; GRANT CREATE ON DATABASE %s TO %[1]s",
		pgx.Identifier{role}.Sanitize(), pgx.Identifier{db.Name}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		pg := db.Postgres()
		_ = pg.Exec(ctx, db.Name, fmt.Sprintf("DROP SCHEMA IF EXISTS pgimageai CASCADE; REASSIGN OWNED BY %[1]s TO postgres; DROP OWNED BY %[1]s", pgx.Identifier{role}.Sanitize()))
		if err := pg.Exec(ctx, "postgres", "DROP ROLE IF EXISTS "+pgx.Identifier{role}.Sanitize()); err != nil {
			t.Errorf("drop role: %v", err)
		}
	})
	u, err := url.Parse(db.DSN())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, "pw")
	out, errOut, code := cli(t, nil, "migrate", "--dsn", u.String())
	if code != 0 || !strings.Contains(out, "migration(s) applied") {
		t.Fatalf("migrate as a role without REPLICATION: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "warning") || !strings.Contains(errOut, "REPLICATION") {
		t.Errorf("migrate did not warn that the role cannot stream:\n%s", errOut)
	}
	// A role that can stream gets no warning.
	if _, errOut, code := cli(t, nil, "migrate", "--dsn", db.DSN()); code != 0 || strings.Contains(errOut, "warning") {
		t.Errorf("migrate as a replication role: exit %d, stderr %q", code, errOut)
	}
}
