package sink_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/migrations"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

func TestMain(m *testing.M) { os.Exit(integration.Main(m)) }

// setup makes a database with the pgimageai schema, a source table
// photos(id, img) and the target captions(id, caption), in a PostgreSQL
// container (Docker; under CI=true a missing engine fails). It returns a
// connection for checks, the target and a writer of lane "captions".
func setup(t *testing.T, typ sink.ResultType, column string) (*pgx.Conn, *sink.Target, *sink.Writer) {
	t.Helper()
	ctx := context.Background()
	db := integration.NewDatabase(t)
	conn := db.Connect(t)
	if _, err := migrations.Apply(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE public.photos (id int PRIMARY KEY, img bytea)"); err != nil {
		t.Fatal(err)
	}
	source, err := catalog.Lookup(ctx, conn, "public.photos")
	if err != nil {
		t.Fatal(err)
	}
	target, err := sink.Ensure(ctx, conn, "public.captions", source, column, typ, false)
	if err != nil {
		t.Fatal(err)
	}
	w := sink.NewWriter(db.DSN(), "s", target.Name())
	t.Cleanup(func() { w.Close(context.Background()) })
	return conn, target, w
}

// xmin returns the transaction that wrote the current version of a row.
func xmin(t *testing.T, conn *pgx.Conn, sql string, args ...any) uint32 {
	t.Helper()
	var x uint32
	if err := conn.QueryRow(context.Background(), "SELECT xmin::text::bigint FROM "+sql, args...).Scan(&x); err != nil {
		t.Fatalf("xmin of %s: %v", sql, err)
	}
	return x
}

// TestWriteOneTransaction: a batch's ops and its lane checkpoint commit in
// one target transaction — the rows they write have the same xmin — so a
// crash never leaves results without their checkpoint or the reverse.
func TestWriteOneTransaction(t *testing.T) {
	conn, target, w := setup(t, sink.TextResult, "caption")
	ctx := context.Background()
	pos := state.Position{Commit: 0x1000, Ord: 1}
	ops := []sink.Op{sink.Upsert{Target: target, Key: []any{int32(1)}, Value: "a cat"},
		state.Error{Rule: "r", SourceTable: "public.photos", Key: []byte(`{"id": 2}`), Reason: "provider_error", Detail: "HTTP 400"}}
	if err := w.Write(ctx, ops, pos, time.Now()); err != nil {
		t.Fatal(err)
	}
	row := xmin(t, conn, "public.captions WHERE id = 1")
	cp := xmin(t, conn, "pgimageai.lane_checkpoints WHERE slot = 's' AND lane = $1", target.Name())
	errs := xmin(t, conn, "pgimageai.errors WHERE rule = 'r'")
	if row != cp || errs != cp {
		t.Errorf("result in transaction %d, errors row in %d, lane checkpoint in %d: want one transaction", row, errs, cp)
	}
	// A batch that fails writes nothing, its checkpoint included.
	bad := []sink.Op{sink.Upsert{Target: target, Key: []any{int32(3)}, Value: "a dog"},
		state.Error{Rule: "r", SourceTable: "public.photos", Key: []byte(`not json`), Reason: "provider_error", Detail: "x"}}
	if err := w.Write(ctx, bad, state.Position{Commit: 0x2000, Ord: 1}, time.Now()); err == nil {
		t.Fatal("a batch with an invalid op was written")
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM public.captions WHERE id = 3").Scan(&n); err != nil || n != 0 {
		t.Errorf("the failed batch left %d rows (%v)", n, err)
	}
	var lsn uint64
	if err := conn.QueryRow(ctx, "SELECT lsn - '0/0' FROM pgimageai.lane_checkpoints WHERE slot = 's'").Scan(&lsn); err != nil || lsn != 0x1000 {
		t.Errorf("lane checkpoint at %x (%v) after a failed batch, want 1000", lsn, err)
	}
}

// TestUpsertUnchangedValue: writing the value a row already holds leaves
// the row as it is — no new row version (and, for a write-back target, no
// new WAL for the bridge to read) — through both the one-row and the
// many-row statement; a different value does write.
func TestUpsertUnchangedValue(t *testing.T) {
	for _, tc := range []struct {
		name string
		typ  sink.ResultType
		col  string
		a, b any
	}{
		{"text", sink.TextResult, "caption", "a cat", "a dog"},
		{"json", sink.JSONResult, "doc", `{"label": "cat"}`, `{"label": "dog"}`},
		{"vector", sink.VectorResult, "embedding", []float32{0.5, 0.25}, []float32{0.5, 0.125}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, target, w := setup(t, tc.typ, tc.col)
			ctx := context.Background()
			ord := int64(0)
			write := func(ops ...sink.Op) {
				t.Helper()
				ord++
				if err := w.Write(ctx, ops, state.Position{Commit: 0x1000, Ord: ord}, time.Now()); err != nil {
					t.Fatal(err)
				}
			}
			one := func(v any) sink.Op { return sink.Upsert{Target: target, Key: []any{int32(1)}, Value: v} }
			write(one(tc.a))
			first := xmin(t, conn, "public.captions WHERE id = 1")
			write(one(tc.a))
			if got := xmin(t, conn, "public.captions WHERE id = 1"); got != first {
				t.Errorf("the same value written again made a new row version (xmin %d, was %d)", got, first)
			}
			if target.Many() {
				write(sink.Upserts{Target: target, Keys: []string{`{"id": 1}`}, Values: []any{tc.a}})
				if got := xmin(t, conn, "public.captions WHERE id = 1"); got != first {
					t.Errorf("the same value through Upserts made a new row version (xmin %d, was %d)", got, first)
				}
			}
			write(one(tc.b))
			if got := xmin(t, conn, "public.captions WHERE id = 1"); got == first {
				t.Error("a different value was not written")
			}
		})
	}
}

// TestUpsertNullAndValue: a result that turns NULL (the image was removed,
// the call failed) replaces the value; a value replaces NULL; NULL written
// over NULL makes no new row version — through the one-row and the many-row
// statement. A comparison with = or <> instead of IS DISTINCT FROM would
// keep the stale value (NULL <> 'x' is NULL, not true).
func TestUpsertNullAndValue(t *testing.T) {
	type step struct {
		value   any  // nil = NULL
		written bool // a new row version
	}
	steps := func(a, b any) []step {
		return []step{
			{nil, true},  // the first write inserts the row, with NULL
			{nil, false}, // NULL over NULL: unchanged
			{a, true},    // NULL → value
			{nil, true},  // value → NULL
			{b, true},    // NULL → another value
			{b, false},   // unchanged
			{a, true},    // value → value
		}
	}
	for _, tc := range []struct {
		name string
		typ  sink.ResultType
		col  string
		a, b any
		many []bool // through Upsert (false) and, where the target takes them, Upserts (true)
	}{
		{"text", sink.TextResult, "caption", "a cat", "a dog", []bool{false, true}},
		{"json", sink.JSONResult, "doc", `{"label": "cat"}`, `{"label": "dog"}`, []bool{false, true}},
		{"vector", sink.VectorResult, "embedding", []float32{0.5, 0.25}, []float32{0.5, 0.125}, []bool{false}},
	} {
		for _, many := range tc.many {
			name := tc.name + "/one row"
			if many {
				name = tc.name + "/many rows"
			}
			t.Run(name, func(t *testing.T) {
				conn, target, w := setup(t, tc.typ, tc.col)
				if many != target.Many() && many {
					t.Fatalf("a %s target takes no Upserts", tc.name)
				}
				ctx := context.Background()
				col := pgx.Identifier{tc.col}.Sanitize()
				var last uint32
				for i, st := range steps(tc.a, tc.b) {
					var op sink.Op = sink.Upsert{Target: target, Key: []any{int32(1)}, Value: st.value}
					if many {
						op = sink.Upserts{Target: target, Keys: []string{`{"id": 1}`}, Values: []any{st.value}}
					}
					if err := w.Write(ctx, []sink.Op{op}, state.Position{Commit: 0x1000, Ord: int64(i + 1)}, time.Now()); err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					var got *string
					if err := conn.QueryRow(ctx, "SELECT "+col+"::text FROM public.captions WHERE id = 1").Scan(&got); err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					if (got == nil) != (st.value == nil) {
						t.Fatalf("step %d: wrote %v, the row holds %v", i, st.value, deref(got))
					}
					x := xmin(t, conn, "public.captions WHERE id = 1")
					if written := x != last; written != st.written {
						t.Errorf("step %d (%v): new row version %t, want %t", i, st.value, written, st.written)
					}
					last = x
				}
			})
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "NULL"
	}
	return *s
}
