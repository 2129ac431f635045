// Package migrations holds the versioned SQL that creates the pgimageai schema
// and applies it. It imports no other package of pgimageai.
//
// Apply is idempotent and safe when several processes run it at once: all
// pending versions are applied in one transaction that first takes a
// transaction-scoped advisory lock, so a concurrent run waits and then finds
// nothing left to do.
//
// Layer: postgres.
package migrations

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

//go:embed sql/*.sql
var files embed.FS

// lockKey is the advisory lock that serialises migration runs: the first 8
// bytes of "pgimageai" as an integer, fixed forever.
const lockKey int64 = 0x7067696d61676561

// Migration is one versioned SQL file, sql/NNNN_name.sql.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// All returns the embedded migrations in version order. It fails when a file
// name lacks its version or two files share one.
func All() ([]Migration, error) {
	return load(files, "sql")
}

func load(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var ms []Migration
	seen := map[int]string{}
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".sql" {
			continue
		}
		base := strings.TrimSuffix(e.Name(), ".sql")
		num, name, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 || name == "" {
			return nil, fmt.Errorf("migration %s: name must be NNNN_description.sql", e.Name())
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %s and %s share version %d", prev, e.Name(), v)
		}
		seen[v] = e.Name()
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: name, SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	return ms, nil
}

// Apply brings the pgimageai schema of the database behind conn up to date and
// returns the versions it applied (none when already current).
func Apply(ctx context.Context, conn *pgx.Conn) ([]int, error) {
	ms, err := All()
	if err != nil {
		return nil, err
	}
	return apply(ctx, conn, ms)
}

func apply(ctx context.Context, conn *pgx.Conn, ms []Migration) (applied []int, err error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey); err != nil {
		return nil, fmt.Errorf("migrate: lock: %w", err)
	}
	const bootstrap = `
CREATE SCHEMA IF NOT EXISTS pgimageai;
CREATE TABLE IF NOT EXISTS pgimageai.schema_migrations (
  version    integer PRIMARY KEY,
  name       text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
)`
	if _, err := tx.Exec(ctx, bootstrap); err != nil {
		return nil, fmt.Errorf("migrate: bootstrap: %w", err)
	}
	done := map[int]bool{}
	rows, err := tx.Query(ctx, "SELECT version FROM pgimageai.schema_migrations")
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	for _, v := range versions {
		done[int(v)] = true
	}
	for _, m := range ms {
		if done[m.Version] {
			continue
		}
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return nil, fmt.Errorf("migrate: %04d_%s: %w", m.Version, m.Name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO pgimageai.schema_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name); err != nil {
			return nil, fmt.Errorf("migrate: record %04d: %w", m.Version, err)
		}
		applied = append(applied, m.Version)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("migrate: commit: %w", err)
	}
	return applied, nil
}

// Drop drops schema pgimageai and everything in it (DROP SCHEMA … CASCADE):
// pgimageai uninstall --drop-schema. It reports whether there was a schema.
// Tables outside the schema (the targets, even those the bridge created) are
// not touched.
func Drop(ctx context.Context, conn *pgx.Conn) (bool, error) {
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_catalog.pg_namespace WHERE nspname = 'pgimageai')").Scan(&exists); err != nil {
		return false, fmt.Errorf("read schema pgimageai: %w", err)
	}
	if !exists {
		return false, nil
	}
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS pgimageai CASCADE"); err != nil {
		return false, fmt.Errorf("drop schema pgimageai: %w", err)
	}
	return true, nil
}
