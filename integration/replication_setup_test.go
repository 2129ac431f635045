package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/replication"
)

// Setup steps of package replication: SyncPublication and EnsureSlot.

// publishedTables lists the tables of publication pub as "schema.table".
func publishedTables(t testing.TB, conn *pgx.Conn, pub string) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), `SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = $1 ORDER BY 1`, pub)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func TestReplicationSyncPublication(t *testing.T) {
	e := newReplEnv(t, nil, photosDDL+`; CREATE SCHEMA "Odd Schema"; CREATE TABLE "Odd Schema"."My ""Table""" (id int PRIMARY KEY, img bytea)`, photos)
	ctx := t.Context()
	odd := pgx.Identifier{"Odd Schema", `My "Table"`}
	sync := func(tables ...pgx.Identifier) {
		t.Helper()
		if err := replication.SyncPublication(ctx, e.conn, e.slot, tables); err != nil {
			t.Fatal(err)
		}
	}
	want := func(names ...string) {
		t.Helper()
		if got := publishedTables(t, e.conn, e.slot); !slices.Equal(got, names) {
			t.Errorf("published %q, want %q", got, names)
		}
	}
	want("public.photos")

	sync(photos, odd, pgx.Identifier{"photos"}) // duplicates collapse; search_path resolves
	want(`Odd Schema.My "Table"`, "public.photos")
	sync(odd, photos) // no change
	want(`Odd Schema.My "Table"`, "public.photos")
	sync(odd)
	want(`Odd Schema.My "Table"`)

	// Someone else's edits are undone: a row filter and narrowed options.
	e.exec(t, fmt.Sprintf(`ALTER PUBLICATION %s SET TABLE public.photos WHERE (id > 10); ALTER PUBLICATION %[1]s SET (publish = 'insert')`, pgx.Identifier{e.slot}.Sanitize()))
	sync(photos)
	var filtered, insertOnly bool
	err := e.conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_publication_rel r JOIN pg_publication p ON p.oid = r.prpubid WHERE p.pubname = $1 AND r.prqual IS NOT NULL),
		NOT (pubupdate AND pubdelete AND pubtruncate AND pubviaroot) FROM pg_publication WHERE pubname = $1`, e.slot).Scan(&filtered, &insertOnly)
	if err != nil {
		t.Fatal(err)
	}
	if filtered || insertOnly {
		t.Errorf("row filter kept %t, options kept %t", filtered, insertOnly)
	}

	// A FOR ALL TABLES publication of that name is replaced.
	e.exec(t, fmt.Sprintf(`DROP PUBLICATION %s; CREATE PUBLICATION %[1]s FOR ALL TABLES`, pgx.Identifier{e.slot}.Sanitize()))
	sync(photos)
	want("public.photos")

	if err := replication.SyncPublication(ctx, e.conn, e.slot, []pgx.Identifier{{"public", "missing"}}); err == nil {
		t.Error("a missing table was accepted")
	}
	want("public.photos")
}

func TestReplicationSlotMismatch(t *testing.T) {
	e := newReplEnv(t, nil, photosDDL, photos)
	ctx := t.Context()
	if err := replication.EnsureSlot(ctx, e.conn, e.slot); err != nil {
		t.Fatalf("EnsureSlot on the existing slot: %v", err)
	}
	slot, found, err := replication.ReadSlot(ctx, e.conn, e.slot)
	if err != nil || !found || slot.Plugin != "pgoutput" || slot.Temporary || slot.ConfirmedFlushLSN == 0 || slot.Database != e.db.Name {
		t.Fatalf("ReadSlot = %+v, %t, %v", slot, found, err)
	}

	other := e.slot[:min(len(e.slot), 55)] + "_td"
	e.exec(t, `SELECT pg_create_logical_replication_slot($1, 'test_decoding')`, other)
	t.Cleanup(func() { replDropSlot(t, e.db.Postgres(), other) })
	if err := replication.EnsureSlot(ctx, e.conn, other); !errors.Is(err, replication.ErrSlotMismatch) {
		t.Errorf("EnsureSlot on a test_decoding slot = %v, want ErrSlotMismatch", err)
	}
	s := replication.NewStream(replication.Config{ConnString: e.db.DSN(), Slot: other, Publication: e.slot})
	if err := s.Run(ctx, 0, make(chan replication.Event)); !errors.Is(err, replication.ErrSlotMismatch) {
		t.Errorf("Run on a test_decoding slot = %v, want ErrSlotMismatch", err)
	}
	s = replication.NewStream(replication.Config{ConnString: e.db.DSN(), Slot: e.slot, Publication: "no_such_pub"})
	if err := s.Run(ctx, 0, make(chan replication.Event)); !errors.Is(err, replication.ErrNoPublication) {
		t.Errorf("Run without the publication = %v, want ErrNoPublication", err)
	}
	// A missing slot may be a failover settling: waited for FailoverWait.
	s = replication.NewStream(replication.Config{ConnString: e.db.DSN(), Slot: "no_such_slot", Publication: e.slot, FailoverWait: time.Second})
	if err := s.Run(ctx, 0, make(chan replication.Event)); !errors.Is(err, replication.ErrNoSlot) || !errors.Is(err, replication.ErrFailoverTimeout) {
		t.Errorf("Run without the slot = %v, want ErrFailoverTimeout wrapping ErrNoSlot", err)
	}
	if err := replication.EnsureSlot(ctx, e.conn, "Not-Valid"); err == nil {
		t.Error("EnsureSlot accepted an invalid slot name")
	}
}
