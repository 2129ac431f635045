package integration_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/store"
)

// loQuerier counts what ReadLargeObject asks of the server.
type loQuerier struct {
	conn      *pgx.Conn
	requested int64 // the sum of lo_get lengths
	calls     int
}

func (q *loQuerier) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	q.calls++
	if n, ok := args[2].(int32); ok {
		q.requested += int64(n)
	}
	return q.conn.QueryRow(ctx, sql, args...)
}

// TestStoreReadLargeObject reads large objects of several sizes against a
// real PostgreSQL: bounded pieces, never more than maxBytes+1 bytes asked
// for, and the reasons of a missing, forbidden or too large object.
func TestStoreReadLargeObject(t *testing.T) {
	db := integration.NewDatabase(t)
	conn := db.Connect(t)
	ctx := context.Background()
	newLO := func(n int) (uint32, []byte) {
		body := bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n]
		var oid uint32
		if err := conn.QueryRow(ctx, "SELECT lo_from_bytea(0, $1)", body).Scan(&oid); err != nil {
			t.Fatal(err)
		}
		return oid, body
	}
	const max = 3<<20 + 5
	tests := []struct {
		name   string
		size   int
		reason string
		calls  int
	}{
		{"empty", 0, "", 1},
		{"small", 1000, "", 1},
		{"one piece exactly", store.LargeObjectPiece, "", 2},
		{"several pieces", 3 << 20, "", 4},
		{"exactly the bound", max, "", 4},
		{"one byte over", max + 1, store.ReasonTooLarge, 4},
		{"far over", 10 << 20, store.ReasonTooLarge, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			oid, body := newLO(tt.size)
			q := &loQuerier{conn: conn}
			got, err := store.ReadLargeObject(ctx, q, oid, max)
			if store.ReasonOf(err) != tt.reason {
				t.Fatalf("ReadLargeObject = %d bytes, %v; want reason %q", len(got), err, tt.reason)
			}
			if tt.reason == "" && !bytes.Equal(got, body) {
				t.Errorf("read %d bytes, want the object's %d", len(got), len(body))
			}
			if q.requested > max+1 {
				t.Errorf("asked for %d bytes, more than the bound + 1 (%d)", q.requested, max+1)
			}
			if q.calls != tt.calls {
				t.Errorf("%d lo_get calls, want %d", q.calls, tt.calls)
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		_, err := store.ReadLargeObject(ctx, conn, 4000000000, max)
		if store.ReasonOf(err) != store.ReasonNotFound {
			t.Errorf("ReadLargeObject(missing) = %v, want image_not_found", err)
		}
	})
	t.Run("forbidden", func(t *testing.T) {
		oid, _ := newLO(100)
		db.Exec(t, "CREATE ROLE "+pgx.Identifier{db.Name + "_nolo"}.Sanitize())
		t.Cleanup(func() { db.Exec(t, "DROP ROLE "+pgx.Identifier{db.Name + "_nolo"}.Sanitize()) })
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, "SET LOCAL ROLE "+pgx.Identifier{db.Name + "_nolo"}.Sanitize()); err != nil {
			t.Fatal(err)
		}
		_, err = store.ReadLargeObject(ctx, tx, oid, max)
		if store.ReasonOf(err) != store.ReasonForbidden {
			t.Errorf("ReadLargeObject as a role without SELECT = %v, want image_forbidden", err)
		}
	})
}
