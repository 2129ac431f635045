package sink_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

// TestWritesKeepRowsRight: the row-level ops leave the rows a source's
// history says they should — a Move over a stale row at the new key, a
// Move replayed after a restart (which must not delete the row it moved),
// an empty text result (kept as ”, not NULL), a write-back result for a
// row deleted meanwhile (never inserted again) — through the writer.
func TestWritesKeepRowsRight(t *testing.T) {
	type step struct {
		op   func(tg *sink.Target) sink.Op
		want string // the target's rows afterwards: id=value, NULL as ∅, by id
	}
	move := func(from, to int) func(*sink.Target) sink.Op {
		return func(tg *sink.Target) sink.Op {
			return sink.Move{Target: tg, OldKey: []any{int32(from)}, NewKey: []any{int32(to)}}
		}
	}
	upsert := func(id int, v any) func(*sink.Target) sink.Op {
		return func(tg *sink.Target) sink.Op { return sink.Upsert{Target: tg, Key: []any{int32(id)}, Value: v} }
	}
	upserts := func(id int, v any) func(*sink.Target) sink.Op {
		return func(tg *sink.Target) sink.Op {
			return sink.Upserts{Target: tg, Keys: []string{fmt.Sprintf(`{"id": %d}`, id)}, Values: []any{v}}
		}
	}
	tests := []struct {
		name      string
		writeBack bool
		steps     []step
	}{
		{"move over a stale row", false, []step{
			{upsert(1, "a"), "1=a"}, {upsert(2, "stale"), "1=a 2=stale"}, {move(1, 2), "2=a"}}},
		{"a move replayed", false, []step{
			{upsert(1, "a"), "1=a"}, {move(1, 2), "2=a"}, {move(1, 2), "2=a"}}},
		{"an empty result is not NULL", false, []step{
			{upsert(1, ""), "1="}, {upserts(2, ""), "1= 2="}, {upserts(2, nil), "1= 2=∅"}, {upsert(1, nil), "1=∅ 2=∅"}}},
		{"write-back never inserts", true, []step{
			{upsert(1, "a"), "1=a 2=∅"}, {upsert(3, "gone"), "1=a 2=∅"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, target, w := setup(t, sink.TextResult, "caption")
			ctx := context.Background()
			table := "public.captions"
			if tt.writeBack {
				table = "public.photos"
				for _, sql := range []string{"ALTER TABLE public.photos ADD COLUMN caption text", "INSERT INTO public.photos (id) VALUES (1), (2)"} {
					if _, err := conn.Exec(ctx, sql); err != nil {
						t.Fatal(err)
					}
				}
				source, err := catalog.Lookup(ctx, conn, "public.photos")
				if err != nil {
					t.Fatal(err)
				}
				if target, err = sink.NewTarget(source, []string{"id"}, "caption", sink.TextResult, "text", true); err != nil {
					t.Fatal(err)
				}
			}
			for i, st := range tt.steps {
				if err := w.Write(ctx, []sink.Op{st.op(target)}, state.Position{Commit: 0x1000, Ord: int64(i + 1)}, time.Now()); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if got := rowsOf(t, conn, table); got != st.want {
					t.Fatalf("step %d: rows %q, want %q", i, got, st.want)
				}
			}
		})
	}
}

// TestHasValueCompositeKey: HasValue finds the row of the whole key, not a
// row sharing one of its columns.
func TestHasValueCompositeKey(t *testing.T) {
	conn, _, _ := setup(t, sink.TextResult, "caption")
	ctx := context.Background()
	for _, sql := range []string{
		"CREATE TABLE public.pairs (a int, b int, img bytea, PRIMARY KEY (a, b))",
		"CREATE TABLE public.pair_out (a int, b int, caption text, PRIMARY KEY (a, b))",
		"INSERT INTO public.pair_out VALUES (1, 1, 'x'), (1, 2, NULL), (2, 1, NULL)",
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	source, err := catalog.Lookup(ctx, conn, "public.pairs")
	if err != nil {
		t.Fatal(err)
	}
	target, err := sink.Ensure(ctx, conn, "public.pair_out", source, "caption", sink.TextResult, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		a, b int32
		want bool
	}{{1, 1, true}, {1, 2, false}, {2, 1, false}, {2, 2, false}} {
		got, err := target.HasValue(ctx, conn, []any{tc.a, tc.b})
		if err != nil || got != tc.want {
			t.Errorf("HasValue(%d, %d) = %t, %v; want %t", tc.a, tc.b, got, err, tc.want)
		}
	}
}

// rowsOf returns "id=caption" for every row of table, by id; NULL as ∅.
func rowsOf(t *testing.T, conn *pgx.Conn, table string) string {
	t.Helper()
	rows, _ := conn.Query(context.Background(), "SELECT id::text || '=' || coalesce(caption, '∅') FROM "+table+" ORDER BY id")
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, " ")
}
