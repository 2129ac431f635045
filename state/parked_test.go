package state_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

// TestParked: a parked row keeps one row per rule and source row; a newer
// change takes its place at the end, a replay keeps its place; unparking,
// deletes, truncates and key moves take it away or along; pages come in
// order of arrival and counts by rule.
func TestParked(t *testing.T) {
	conn := migrated(t)
	ctx := context.Background()
	write := func(ops ...sink.Op) {
		t.Helper()
		b := &pgx.Batch{}
		for _, op := range ops {
			op.Queue(b)
		}
		if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() }); err != nil {
			t.Fatal(err)
		}
	}
	park := func(rule, key string, replay bool) sink.Op {
		return state.Park{Rule: rule, SourceTable: "public.photos", Key: []byte(key), Model: "vision", LSN: 100, Cause: "refused", Replay: replay}
	}
	order := func(rules ...string) string {
		t.Helper()
		rows, err := state.ParkedPage(ctx, conn, rules, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		out := ""
		for _, r := range rows {
			out += r.Rule + string(r.Key) + " "
		}
		return out
	}
	write(park("a", `{"id": 1}`, false), park("a", `{"id": 2}`, false), park("a", `{"id": 3}`, false), park("b", `{"id": 1}`, false))
	tests := []struct {
		name string
		ops  []sink.Op
		want string
	}{
		{name: "in order of arrival", want: `a{"id": 1} a{"id": 2} a{"id": 3} b{"id": 1} `},
		{name: "a replay keeps its place", ops: []sink.Op{park("a", `{"id": 1}`, true)}, want: `a{"id": 1} a{"id": 2} a{"id": 3} b{"id": 1} `},
		{name: "a newer change goes to the end", ops: []sink.Op{park("a", `{"id": 1}`, false)}, want: `a{"id": 2} a{"id": 3} b{"id": 1} a{"id": 1} `},
		{name: "unpark one rule's row", ops: []sink.Op{state.Unpark{Rule: "a", Keys: []string{`{"id": 2}`}}}, want: `a{"id": 3} b{"id": 1} a{"id": 1} `},
		{name: "a move takes it along", ops: []sink.Op{state.RekeyParked{Rules: []string{"a"}, OldKey: []byte(`{"id": 3}`), NewKey: []byte(`{"id": 30}`)}},
			want: `a{"id": 30} b{"id": 1} a{"id": 1} `},
		{name: "a move onto a parked key keeps the moved one", ops: []sink.Op{park("a", `{"id": 31}`, false),
			state.RekeyParked{Rules: []string{"a"}, OldKey: []byte(`{"id": 30}`), NewKey: []byte(`{"id": 31}`)}},
			want: `a{"id": 31} b{"id": 1} a{"id": 1} `},
		{name: "a delete", ops: []sink.Op{state.UnparkRows{Rules: []string{"a", "b"}, Key: []byte(`{"id": 1}`)}}, want: `a{"id": 31} `},
		{name: "unpark many", ops: []sink.Op{park("a", `{"id": 5}`, false), park("a", `{"id": 6}`, false),
			state.Unpark{Rule: "a", Keys: []string{`{"id": 5}`, `{"id": 31}`}}}, want: `a{"id": 6} `},
		{name: "a truncate", ops: []sink.Op{park("b", `{"id": 7}`, false), state.UnparkRows{Rules: []string{"a"}}}, want: `b{"id": 7} `},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.ops) > 0 {
				write(tc.ops...)
			}
			if got := order("a", "b"); got != tc.want {
				t.Errorf("parked %q, want %q", got, tc.want)
			}
		})
	}
	counts, err := state.ParkedCounts(ctx, conn, nil)
	if err != nil || len(counts) != 1 || counts[0].Rule != "b" || counts[0].Rows != 1 || counts[0].Model != "vision" || counts[0].Oldest.IsZero() {
		t.Errorf("counts %+v, %v", counts, err)
	}
	if n := queryN(t, conn, `SELECT attempts FROM pgimageai.parked WHERE rule = 'b'`); n != 1 {
		t.Errorf("attempts %d, want 1", n)
	}

	// The models' circuits for status.
	since := time.Date(2026, 12, 4, 20, 0, 0, 0, time.UTC)
	if err := state.WriteModelHealth(ctx, conn, "s", state.ModelHealth{Model: "vision", Down: true, Since: since, Cause: "refused"}); err != nil {
		t.Fatal(err)
	}
	hs, err := state.ModelHealths(ctx, conn, "s")
	if err != nil || len(hs) != 1 || !hs[0].Down || !hs[0].Since.Equal(since) || hs[0].Cause != "refused" {
		t.Fatalf("health %+v, %v", hs, err)
	}
	back := since.Add(time.Minute)
	if err := state.WriteModelHealth(ctx, conn, "s", state.ModelHealth{Model: "vision", Since: back, DownSince: since, Probes: 4}); err != nil {
		t.Fatal(err)
	}
	hs, err = state.ModelHealths(ctx, conn, "s")
	if err != nil || len(hs) != 1 || hs[0].Down || !hs[0].Since.Equal(back) || !hs[0].DownSince.Equal(since) || hs[0].Probes != 4 || hs[0].Cause != "" {
		t.Fatalf("health after %+v, %v", hs, err)
	}
	if hs, err := state.ModelHealths(ctx, conn, "other"); err != nil || len(hs) != 0 {
		t.Errorf("another slot's health %+v, %v", hs, err)
	}
}

func queryN(t *testing.T, conn *pgx.Conn, sql string) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestForgetKeysUnparks: the rows reconciliation removes as gone lose their
// parked rows too, in the same transaction; other rules' and keys' stay.
func TestForgetKeysUnparks(t *testing.T) {
	conn := migrated(t)
	ctx := context.Background()
	b := &pgx.Batch{}
	for _, p := range []state.Park{
		{Rule: "a", SourceTable: "public.photos", Key: []byte(`{"id": 1}`), Model: "vision", LSN: 100, Cause: "refused"},
		{Rule: "a", SourceTable: "public.photos", Key: []byte(`{"id": 2}`), Model: "vision", LSN: 100, Cause: "refused"},
		{Rule: "b", SourceTable: "public.photos", Key: []byte(`{"id": 1}`), Model: "vision", LSN: 100, Cause: "refused"},
	} {
		p.Queue(b)
	}
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() }); err != nil {
		t.Fatal(err)
	}
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		return state.ForgetKeys(ctx, tx, []string{"a"}, []string{`{"id": 1}`})
	}); err != nil {
		t.Fatal(err)
	}
	rows, err := state.ParkedPage(ctx, conn, []string{"a", "b"}, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got string
	for _, r := range rows {
		got += r.Rule + string(r.Key) + " "
	}
	if got != `a{"id": 2} b{"id": 1} ` {
		t.Fatalf("parked after ForgetKeys: %q", got)
	}
}
