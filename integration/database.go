// Database gives each integration test a database of its own in a PostgreSQL container.

package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgimageai/pgimageai/internal/pgerr"
)

// Database is a database of one test, dropped when the test ends.
type Database struct {
	// Name is unique within the container; tests may use it as a prefix for slot and
	// publication names, which PostgreSQL scopes to the whole server.
	Name string
	pg   *Postgres
}

// NewDatabase creates a database for tb in the shared container and drops it (with its
// replication slots) in tb.Cleanup.
func NewDatabase(tb testing.TB) *Database {
	tb.Helper()
	return Shared(tb).NewDatabase(tb)
}

var databaseSeq atomic.Int64

// NewDatabase creates a database for tb in p and drops it (with its replication slots) in
// tb.Cleanup.
func (p *Postgres) NewDatabase(tb testing.TB) *Database {
	tb.Helper()
	name := databaseName(databaseSeq.Add(1), tb.Name())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.Exec(ctx, "postgres", "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatalf("integration: create database: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := p.dropDatabase(ctx, name); err != nil {
			tb.Errorf("integration: drop database %s: %v", name, err)
		}
	})
	return &Database{Name: name, pg: p}
}

// databaseName makes a valid, unique, recognisable identifier from a test name.
func databaseName(seq int64, testName string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "t%d_", seq)
	for _, r := range strings.ToLower(testName) {
		if b.Len() >= 63 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else if !strings.HasSuffix(b.String(), "_") {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// dropDatabase drops the replication slots of database name (ending the walsenders that
// hold them: a slot blocks DROP DATABASE even WITH (FORCE)), then the database.
func (p *Postgres) dropDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, p.DSN("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for {
		_, err := conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid)
			FROM pg_replication_slots WHERE database = $1 AND active_pid IS NOT NULL`, name)
		if err != nil {
			return err
		}
		_, err = conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name)
			FROM pg_replication_slots WHERE database = $1 AND active_pid IS NULL`, name)
		var pgErr *pgconn.PgError
		if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == pgerr.ObjectInUse) {
			return err // 55006 object_in_use: a walsender took the slot again; retry
		}
		var left int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE database = $1`, name).Scan(&left); err != nil {
			return err
		}
		if left == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d replication slot(s) remain: %w", left, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	return err
}

// Postgres returns the container that holds d.
func (d *Database) Postgres() *Postgres { return d.pg }

// DSN returns a URL connecting to d as the superuser.
func (d *Database) DSN() string { return d.pg.DSN(d.Name) }

// ReplicationDSN returns a URL for a logical replication connection to d.
func (d *Database) ReplicationDSN() string { return d.pg.ReplicationDSN(d.Name) }

// Connect opens a connection to d that is closed in tb.Cleanup.
func (d *Database) Connect(tb testing.TB) *pgx.Conn {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, d.DSN())
	if err != nil {
		tb.Fatalf("integration: connect to %s: %v", d.Name, err)
	}
	tb.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// Exec runs sql with args in d and fails tb on error. It may be called from a cleanup.
func (d *Database) Exec(tb testing.TB, sql string, args ...any) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := d.pg.Exec(ctx, d.Name, sql, args...); err != nil {
		tb.Fatalf("integration: %v", err)
	}
}
