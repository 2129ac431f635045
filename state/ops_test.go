package state_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/state"
)

// TestOpsTouchOnlyTheirRulesAndRows: each bookkeeping op of a lane write
// resolves, forgets or moves the errors rows and stored inputs of its own
// rules and rows only — another rule's (another lane's, maybe behind) and
// another row's stay — and never touches resolved rows.
func TestOpsTouchOnlyTheirRulesAndRows(t *testing.T) {
	key := func(id int) []byte { return []byte(fmt.Sprintf(`{"id": %d}`, id)) }
	tests := []struct {
		name    string
		ops     []op
		errors  string // errors rows afterwards: rule, id, r when resolved
		results string // stored inputs afterwards: rule, id, =input
	}{
		{"nothing", nil,
			"a1 a1r a2 b1 b2", "a1=x a2=x b1=x b2=x"},
		{"resolve", []op{state.Resolve{Rule: "a", Key: key(1)}},
			"a1r a1r a2 b1 b2", "a1=x a2=x b1=x b2=x"},
		{"resolves", []op{state.Resolves{Rule: "a", Keys: []string{string(key(1))}}},
			"a1r a1r a2 b1 b2", "a1=x a2=x b1=x b2=x"},
		{"forget a deleted row", []op{state.ForgetRow{SourceTable: "public.t", Key: key(1), Rules: []string{"a"}}},
			"a1r a1r a2 b1 b2", "a2=x b1=x b2=x"},
		{"forget a row of another table", []op{state.ForgetRow{SourceTable: "public.other", Key: key(1), Rules: []string{"a"}}},
			"a1 a1r a2 b1 b2", "a2=x b1=x b2=x"},
		{"forget a truncated table", []op{state.ForgetRow{SourceTable: "public.t", Rules: []string{"a"}}},
			"a1r a1r a2r b1 b2", "b1=x b2=x"},
		{"a NULL result forgets its input", []op{state.ResultInput{Rule: "a", Key: key(1)}},
			"a1 a1r a2 b1 b2", "a2=x b1=x b2=x"},
		{"a new input", []op{state.ResultInput{Rule: "a", Key: key(1), InputKey: []byte("y")}},
			"a1 a1r a2 b1 b2", "a1=y a2=x b1=x b2=x"},
		{"many inputs, one NULL", []op{state.ResultInputs{Rule: "a", Keys: []string{string(key(1)), string(key(3))}, InputKeys: [][]byte{nil, []byte("y")}}},
			"a1 a1r a2 b1 b2", "a2=x a3=y b1=x b2=x"},
		{"rekey", []op{state.RekeyErrors{SourceTable: "public.t", OldKey: key(1), NewKey: key(3), Rules: []string{"a"}}},
			"a1r a2 a3 b1 b2", "a2=x a3=x b1=x b2=x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := migrated(t)
			ctx := context.Background()
			b := &pgx.Batch{}
			for _, rule := range []string{"a", "b"} {
				for id := 1; id <= 2; id++ {
					state.Error{Rule: rule, SourceTable: "public.t", Key: key(id), Reason: "empty_image", Detail: "x"}.Queue(b)
					state.ResultInput{Rule: rule, Key: key(id), InputKey: []byte("x")}.Queue(b)
				}
			}
			// A resolved errors row of a1 beside its open one.
			b.Queue(`UPDATE pgimageai.errors SET resolved_at = now() WHERE rule = 'a' AND source_key = '{"id": 1}'`)
			state.Error{Rule: "a", SourceTable: "public.t", Key: key(1), Reason: "empty_image", Detail: "again"}.Queue(b)
			if err := conn.SendBatch(ctx, b).Close(); err != nil {
				t.Fatal(err)
			}
			b = &pgx.Batch{}
			for _, o := range tt.ops {
				o.Queue(b)
			}
			if err := conn.SendBatch(ctx, b).Close(); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(column(t, conn, `SELECT rule || (source_key->>'id') || CASE WHEN resolved_at IS NULL THEN '' ELSE 'r' END FROM pgimageai.errors`), " "); got != tt.errors {
				t.Errorf("errors rows %q, want %q", got, tt.errors)
			}
			if got := strings.Join(column(t, conn, `SELECT rule || (source_key->>'id') || '=' || convert_from(input_key, 'UTF8') FROM pgimageai.results`), " "); got != tt.results {
				t.Errorf("stored inputs %q, want %q", got, tt.results)
			}
		})
	}
}

// op is what the ops implement (sink.Op).
type op interface{ Queue(*pgx.Batch) }

// column returns the text values of a one-column query, sorted.
func column(t *testing.T, conn *pgx.Conn, sql string) []string {
	t.Helper()
	rows, _ := conn.Query(context.Background(), sql)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	slices.Sort(out)
	return out
}
