package pgtest

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestStart: a server from the host's binaries accepts connections with
// logical decoding on, and Stop removes its directory. Without binaries the
// test fails under CI=true and is skipped elsewhere.
func TestStart(t *testing.T) {
	if _, err := BinDir(); err != nil {
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatal(err)
		}
		t.Skip(err) // ok-to-skip: no PostgreSQL binaries outside CI
	}
	ctx := context.Background()
	s, err := Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := s.Dir
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	var level string
	if err := conn.QueryRow(ctx, "SHOW wal_level").Scan(&level); err != nil || level != "logical" {
		t.Fatalf("wal_level %q (%v), want logical", level, err)
	}
	conn.Close(ctx)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s left behind: %v", dir, err)
	}
}
