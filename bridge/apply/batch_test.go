package apply

import (
	"fmt"
	"testing"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

// TestBatchRuns: consecutive results of distinct rows become one statement
// per column and rule; a second result for a row, or any other item, ends
// the run, so each row's changes stay in order.
func TestBatchRuns(t *testing.T) {
	table := &catalog.Table{Schema: "public", Name: "t", Regclass: "public.t",
		Columns: []catalog.Column{{Name: "id", Type: "integer"}, {Name: "c", Type: "text"}, {Name: "d", Type: "text"}}}
	target := func(col string) *sink.Target {
		tg, err := sink.NewTarget(table, []string{"id"}, col, sink.TextResult, "text", false)
		if err != nil {
			t.Fatal(err)
		}
		return tg
	}
	a, b := testRule(t, functions.Complete, 0), testRule(t, functions.Complete, 0)
	a.Name, a.Target = "a", target("c")
	b.Name, b.Target = "b", target("d")
	result := func(r *rules.Rule, id int, text string, err error) work.Item {
		res := functions.Result{Text: text}
		if err != nil {
			res = functions.Result{Null: true}
		}
		return work.Item{Kind: work.Result, Rule: r.Ref(), Dest: work.Dest{Target: r.Target}, Row: work.Row{Key: []any{id}, JSON: []byte(fmt.Sprintf(`{"id": %d}`, id))}, Call: done(res, err)}
	}
	fail := &functions.Error{Reason: functions.ProviderError, Detail: "HTTP 400", ImageBytes: 5}
	tests := []struct {
		name  string
		items []work.Item
		want  string // the ops, in order
	}{
		{"a run of rows", []work.Item{result(a, 1, "x", nil), result(a, 2, "y", nil), result(a, 3, "", fail)},
			"Upserts(c:1,2,3) ResultInputs(a:1,2,3) Resolves(a:1,2) Error(a:3)"},
		{"two rules, two columns, one run", []work.Item{result(a, 1, "x", nil), result(b, 1, "y", nil), result(a, 2, "z", nil)},
			"Upserts(c:1,2) Upserts(d:1) ResultInputs(a:1,2) ResultInputs(b:1) Resolves(a:1,2) Resolves(b:1)"},
		{"a row again ends the run", []work.Item{result(a, 1, "x", nil), result(a, 2, "y", nil), result(a, 1, "z", nil)},
			"Upserts(c:1,2) ResultInputs(a:1,2) Resolves(a:1,2) Upserts(c:1) ResultInputs(a:1) Resolves(a:1)"},
		{"a delete ends the run", []work.Item{result(a, 1, "x", nil), {Kind: work.Delete, Rule: a.Ref(), Dest: work.Dest{Target: a.Target}, Row: work.Row{Key: []any{2}, JSON: []byte(`{"id": 2}`)}}, result(a, 2, "y", nil)},
			"Upserts(c:1) ResultInputs(a:1) Resolves(a:1) Delete ForgetRow Upserts(c:2) ResultInputs(a:2) Resolves(a:2)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var bt batch
			for i := range tt.items {
				bt.add(&tt.items[i])
			}
			if got := describeOps(bt.final(nil)); got != tt.want {
				t.Errorf("ops\n  %s\nwant\n  %s", got, tt.want)
			}
		})
	}
}

// TestBatchDropped: the failures that the write found over the cap are
// counted by rule and reason and taken out of the errors rows written.
func TestBatchDropped(t *testing.T) {
	a := testRule(t, functions.Complete, 0)
	a.Name = "a"
	var bt batch
	for id := 1; id <= 3; id++ {
		bt.add(&work.Item{Kind: work.Result, Rule: a.Ref(), Dest: work.Dest{Target: a.Target},
			Row:  work.Row{Key: []any{id}, JSON: []byte(fmt.Sprintf(`{"id": %d}`, id))},
			Call: done(functions.Result{Null: true}, &functions.Error{Reason: functions.EmptyImage, Detail: "empty", ImageBytes: 0})})
	}
	n := 0
	for _, op := range bt.final(nil) {
		if e, ok := op.(state.Error); ok {
			*e.Dropped = n > 0 // what the write says: the first recorded, the others over the cap
			n++
		}
	}
	got := bt.dropped()
	if want := map[[2]string]int{{"a", "empty_image"}: 2}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("dropped = %v, want %v", got, want)
	}
	if bt.errorsN != 1 || bt.reasons["empty_image"] != 1 {
		t.Errorf("errors rows written: %d, by reason %v; want 1", bt.errorsN, bt.reasons)
	}
}

// describeOps names each op, with its column or rule and its rows' ids.
func describeOps(ops []sink.Op) string {
	ids := func(keys []string) string {
		out := ""
		for i, k := range keys {
			var id int
			fmt.Sscanf(k, `{"id": %d}`, &id)
			if i > 0 {
				out += ","
			}
			out += fmt.Sprint(id)
		}
		return out
	}
	var out string
	for _, op := range ops {
		if _, ok := op.(state.Usage); ok {
			continue // the batch's usage, last
		}
		if out != "" {
			out += " "
		}
		switch o := op.(type) {
		case sink.Upserts:
			out += fmt.Sprintf("Upserts(%s:%s)", o.Target.Column, ids(o.Keys))
		case state.ResultInputs:
			out += fmt.Sprintf("ResultInputs(%s:%s)", o.Rule, ids(o.Keys))
		case state.Resolves:
			out += fmt.Sprintf("Resolves(%s:%s)", o.Rule, ids(o.Keys))
		case state.Error:
			out += fmt.Sprintf("Error(%s:%s)", o.Rule, ids([]string{string(o.Key)}))
		case sink.Delete:
			out += "Delete"
		case state.ForgetRow:
			out += "ForgetRow"
		default:
			out += fmt.Sprintf("%T", op)
		}
	}
	return out
}
