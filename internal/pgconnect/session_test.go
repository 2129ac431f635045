package pgconnect_test

import (
	"context"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/internal/pgconnect"
)

func TestMain(m *testing.M) { os.Exit(integration.Main(m)) }

// TestSessionSettings: a session opened by pgconnect has the pinned
// search_path and row_security whatever the role's or database's own
// settings and whatever the connection string asks for, on a plain and on
// a replication connection.
func TestSessionSettings(t *testing.T) {
	db := integration.NewDatabase(t)
	role := "settings_" + db.Name
	db.Exec(t, "CREATE ROLE "+role+" LOGIN REPLICATION PASSWORD 'pw'")
	db.Exec(t, "ALTER ROLE "+role+" SET search_path = public")
	db.Exec(t, "ALTER ROLE "+role+" SET row_security = on")
	db.Exec(t, "ALTER DATABASE "+pgx.Identifier{db.Name}.Sanitize()+" SET search_path = public")
	t.Cleanup(func() { _ = db.Postgres().Exec(context.Background(), "postgres", "DROP ROLE IF EXISTS "+role) })
	u, err := url.Parse(db.DSN())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, "pw")
	plain := u.String()
	tests := []struct{ name, dsn string }{
		{"role and database settings", plain},
		{"options in the connection string", plain + "&options=-c%20search_path%3Dpublic%20-c%20row_security%3Don"},
		{"search_path as a parameter", plain + "&search_path=public"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			conn, err := pgconnect.Connect(ctx, tt.dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			var path, rls string
			if err := conn.QueryRow(ctx, "SELECT current_setting('search_path'), current_setting('row_security')").Scan(&path, &rls); err != nil {
				t.Fatal(err)
			}
			if path != "pg_catalog, pg_temp" || rls != "off" {
				t.Errorf("search_path %q, row_security %q; want pg_catalog, pg_temp and off", path, rls)
			}
			// The replication protocol's session too.
			cfg, err := pgconnect.ParseConn(tt.dsn + "&replication=database")
			if err != nil {
				t.Fatal(err)
			}
			rc, err := pgconnectReplication(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close(ctx)
			res, err := rc.Exec(ctx, "SHOW search_path").ReadAll()
			if err != nil || len(res) != 1 || len(res[0].Rows) != 1 || string(res[0].Rows[0][0]) != "pg_catalog, pg_temp" {
				t.Errorf("replication session search_path: %v, %v", res, err)
			}
		})
	}
}

func pgconnectReplication(ctx context.Context, cfg *pgconn.Config) (*pgconn.PgConn, error) {
	return pgconn.ConnectConfig(ctx, cfg)
}
