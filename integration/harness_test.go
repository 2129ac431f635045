package integration_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/integration"
)

func TestMain(m *testing.M) { os.Exit(integration.Main(m)) }

// TestPostgresReady checks what every other integration test assumes of the image.
func TestPostgresReady(t *testing.T) {
	db := integration.NewDatabase(t)
	conn := db.Connect(t)
	ctx := t.Context()

	var version int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version < 170000 {
		t.Errorf("server_version_num = %d, want >= 170000", version)
	}

	var walLevel string
	if err := conn.QueryRow(ctx, "SHOW wal_level").Scan(&walLevel); err != nil {
		t.Fatal(err)
	}
	if walLevel != "logical" {
		t.Errorf("wal_level = %q, want logical", walLevel)
	}

	if _, err := conn.Exec(ctx, "CREATE EXTENSION vector"); err != nil {
		t.Fatalf("CREATE EXTENSION vector: %v (the image %q lacks pgvector; "+
			"use scripts/build-test-image.sh or an image with pgvector)", err, os.Getenv(integration.ImageEnv))
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE embeddings (id int PRIMARY KEY, v vector(3))"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO embeddings VALUES (1, $1)", "[1,2,3]"); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := conn.QueryRow(ctx, "SELECT v::text FROM embeddings WHERE v = '[1,2,3]'::vector(3)").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "[1,2,3]" {
		t.Errorf("vector round trip = %q, want [1,2,3]", got)
	}
}

// TestDatabaseCleanupDropsSlots checks that a test's database is dropped even when a
// logical replication slot lives in it.
func TestDatabaseCleanupDropsSlots(t *testing.T) {
	var name string
	t.Run("with slot", func(t *testing.T) {
		db := integration.NewDatabase(t)
		name = db.Name
		db.Exec(t, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", db.Name)
	})

	conn, err := pgx.Connect(t.Context(), integration.Shared(t).DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	err = conn.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM pg_database WHERE datname = $1)
		+ (SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1)`, name).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("database or slot %s still exists after cleanup", name)
	}
}

// TestStopStartPause checks the lifecycle helpers on a container of the test's own: the
// data and the DSN survive Stop/Start, and a paused server does not answer.
func TestStopStartPause(t *testing.T) {
	pg := integration.StartPostgres(t)
	db := pg.NewDatabase(t)
	db.Exec(t, "CREATE TABLE kept (v int)")
	db.Exec(t, "INSERT INTO kept VALUES (42)")
	dsn := db.DSN()
	ctx := t.Context()

	if err := pg.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if conn, err := pgx.Connect(ctx, dsn); err == nil {
		conn.Close(ctx)
		t.Fatal("connected to a stopped server")
	}
	if err := pg.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := db.DSN(); got != dsn {
		t.Errorf("DSN changed across restart: %s -> %s", dsn, got)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect after restart: %v", err)
	}
	defer conn.Close(context.Background())
	var v int
	if err := conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != 42 {
		t.Fatalf("after restart: v = %d, err = %v; want 42", v, err)
	}

	if err := pg.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Unpause(context.Background()) }) // in case the test fails while paused
	queryCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	err = conn.QueryRow(queryCtx, "SELECT 1").Scan(&v)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("query on a paused server: err = %v, want a deadline error", err)
	}
	if err := pg.Unpause(ctx); err != nil {
		t.Fatal(err)
	}
	db.Exec(t, "SELECT 1")
}
