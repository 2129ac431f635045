package integration_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/migrations"
)

func TestMigrationsTwiceInARow(t *testing.T) {
	db := integration.NewDatabase(t)
	conn := db.Connect(t)
	ctx := context.Background()
	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	first, err := migrations.Apply(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != len(all) {
		t.Fatalf("first run applied %v, want all %d", first, len(all))
	}
	second, err := migrations.Apply(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if len(second) != 0 {
		t.Fatalf("second run applied %v, want none", second)
	}
	for _, table := range []string{"models", "rules", "errors", "checkpoints", "schema_migrations"} {
		if n := queryInt(t, conn, "SELECT count(*) FROM pg_tables WHERE schemaname = 'pgimageai' AND tablename = $1", table); n != 1 {
			t.Errorf("table pgimageai.%s missing", table)
		}
	}
}

func TestMigrationsConcurrently(t *testing.T) {
	db := integration.NewDatabase(t)
	ctx := context.Background()
	const runners = 2
	conns := make([]*pgx.Conn, runners)
	for i := range conns {
		conns[i] = db.Connect(t)
	}
	applied := make([][]int, runners)
	errs := make([]error, runners)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			applied[i], errs[i] = migrations.Apply(ctx, conns[i])
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("runner %d: %v", i, err)
		}
	}
	all, _ := migrations.All()
	if total := len(applied[0]) + len(applied[1]); total != len(all) {
		t.Fatalf("runners applied %v and %v; want %d versions applied exactly once in total", applied[0], applied[1], len(all))
	}
	if n := queryInt(t, conns[0], "SELECT count(*) FROM pgimageai.schema_migrations"); n != len(all) {
		t.Fatalf("schema_migrations has %d rows, want %d", n, len(all))
	}
}

func TestMigrationConstraints(t *testing.T) {
	db := integration.NewDatabase(t)
	conn := db.Connect(t)
	ctx := context.Background()
	if _, err := migrations.Apply(ctx, conn); err != nil {
		t.Fatal(err)
	}
	db.Exec(t, `INSERT INTO pgimageai.models (name, model) VALUES ('m', 'gpt-4o-mini')`)
	tests := []struct {
		name     string
		sql      string
		sqlstate string // "" = must succeed
	}{
		{"complete with prompt", `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
			VALUES ('ok1', 'photos', 'img', 'AI_IMAGE_COMPLETE', 'm', 'Describe', 'captions', 'caption')`, ""},
		{"embed without prompt", `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, target_table, target_column)
			VALUES ('ok2', 'photos', 'img', 'AI_IMAGE_EMBED', 'm', 'embeddings', 'vec')`, ""},
		{"complete without prompt", `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, target_table, target_column)
			VALUES ('bad1', 'photos', 'img', 'AI_IMAGE_COMPLETE', 'm', 'c2', 'caption')`, "23514"},
		{"embed with prompt", `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
			VALUES ('bad2', 'photos', 'img', 'AI_IMAGE_EMBED', 'm', 'Describe', 'e2', 'vec')`, "23514"},
		{"unknown function", `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
			VALUES ('bad3', 'photos', 'img', 'AI_IMAGE_SHOUT', 'm', 'x', 'c3', 'caption')`, "23514"},
		{"unknown model", `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
			VALUES ('bad4', 'photos', 'img', 'AI_IMAGE_COMPLETE', 'nope', 'x', 'c4', 'caption')`, "23503"},
		{"same target column twice", `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
			VALUES ('bad5', 'photos', 'img', 'AI_IMAGE_COMPLETE', 'm', 'x', 'captions', 'caption')`, "23505"},
		{"api key in api_key_env", `INSERT INTO pgimageai.models (name, model, api_key_env) VALUES ('leak', 'gpt', 'sk-proj-abc123')`, "23514"},
		{"env var name ok", `INSERT INTO pgimageai.models (name, model, api_key_env) VALUES ('env', 'gpt', 'OPENAI_API_KEY')`, ""},
		{"options not an object", `INSERT INTO pgimageai.models (name, model, options) VALUES ('arr', 'gpt', '[1]')`, "23514"},
		{"unknown reason", `INSERT INTO pgimageai.errors (rule, source_table, source_key, reason, detail) VALUES ('r', 't', '{}', 'oops', 'x')`, "23514"},
		{"first open error", `INSERT INTO pgimageai.errors (rule, source_table, source_key, reason, detail) VALUES ('r', 't', '{"id": 1}', 'empty_image', 'x')`, ""},
		{"second open error same row", `INSERT INTO pgimageai.errors (rule, source_table, source_key, reason, detail) VALUES ('r', 't', '{"id": 1}', 'unknown_format', 'x')`, "23505"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := conn.Exec(ctx, tc.sql)
			var pgErr *pgconn.PgError
			switch {
			case tc.sqlstate == "" && err != nil:
				t.Fatalf("want success, got %v", err)
			case tc.sqlstate != "" && (!errors.As(err, &pgErr) || pgErr.Code != tc.sqlstate):
				t.Fatalf("want SQLSTATE %s, got %v", tc.sqlstate, err)
			}
		})
	}
}
