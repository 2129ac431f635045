package sink_test

import (
	"context"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/migrations"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

// TestKeyParametersKeepValues: the target statements name their key
// parameters' types (so that a widened key changes them), without the
// modifier — a key of character(8), bit(4), numeric(6,2) or varchar(4) is
// written, moved and deleted whole, through the one-row and the many-row
// statements, and a key too long for varchar(4) fails rather than being cut.
func TestKeyParametersKeepValues(t *testing.T) {
	ctx := context.Background()
	db := integration.NewDatabase(t)
	conn := db.Connect(t)
	if _, err := migrations.Apply(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE public.k_src (c character(8), b bit(4), n numeric(6,2), v varchar(4), img bytea, PRIMARY KEY (c, b, n, v))`); err != nil {
		t.Fatal(err)
	}
	source, err := catalog.Lookup(ctx, conn, "public.k_src")
	if err != nil {
		t.Fatal(err)
	}
	target, err := sink.Ensure(ctx, conn, "public.k_out", source, "caption", sink.TextResult, true)
	if err != nil {
		t.Fatal(err)
	}
	w := sink.NewWriter(db.DSN(), "s", target.Name())
	t.Cleanup(func() { w.Close(context.Background()) })
	pos := state.Position{Commit: 0x1000}
	write := func(ops ...sink.Op) error {
		pos.Ord++
		return w.Write(ctx, ops, pos, time.Now())
	}
	key := func(c, b, n, v string) []any { return []any{c, b, n, v} }
	if err := write(
		sink.Upsert{Target: target, Key: key("abcdefgh", "1010", "1234.56", "wxyz"), Value: "one"},
		sink.Upserts{Target: target, Keys: []string{`{"c": "bcdefghi", "b": "0101", "n": 12.5, "v": "abcd"}`}, Values: []any{"two"}},
	); err != nil {
		t.Fatal(err)
	}
	if err := write(sink.Move{Target: target, OldKey: key("abcdefgh", "1010", "1234.56", "wxyz"), NewKey: key("hgfedcba", "1111", "9999.99", "zyxw")}); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, "SELECT c || '/' || b::text || '/' || n::text || '/' || v || '=' || caption FROM public.k_out ORDER BY caption")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	if want := []string{"hgfedcba/1111/9999.99/zyxw=one", "bcdefghi/0101/12.50/abcd=two"}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("target rows %q, want %q", got, want)
	}
	if err := write(sink.Delete{Target: target, Key: key("hgfedcba", "1111", "9999.99", "zyxw")}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM public.k_out").Scan(&n); err != nil || n != 1 {
		t.Errorf("%d rows after the delete (%v), want 1", n, err)
	}
	if err := write(sink.Upsert{Target: target, Key: key("abcdefgh", "1010", "1.00", "too long"), Value: "x"}); err == nil {
		t.Error("a key too long for varchar(4) was written (cut?)")
	}
	if err := write(sink.Upserts{Target: target, Keys: []string{`{"c": "abcdefgh", "b": "1010", "n": 1, "v": "too long"}`}, Values: []any{"x"}}); err == nil {
		t.Error("a key too long for varchar(4) was written by the many-row statement (cut?)")
	}
}
