package apply

import (
	"testing"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/functions"
)

// TestRowCountsPending: a change at a busy row follows the call of the last
// result routed for the row and rule when it had the same input and nothing
// after it moved, deleted or truncated the row.
func TestRowCountsPending(t *testing.T) {
	const lane = "public.captions"
	ruleA, ruleB := &rules.Rule{Config: rules.Config{Name: "a"}}, &rules.Rule{Config: rules.Config{Name: "b"}}
	k1, k2 := work.KeyOf(functions.Complete, "m", "", "p", []byte("one")), work.KeyOf(functions.Complete, "m", "", "p", []byte("two"))
	row, other := []byte(`{"id": 1}`), []byte(`{"id": 2}`)
	callOf := func(k work.Key) *work.Call { return &work.Call{Done: make(chan struct{}), Key: &k} }
	result := func(r *rules.Rule, key []byte, c *work.Call) *work.Item {
		return &work.Item{Kind: work.Result, Rule: r.Ref(), Row: work.Row{JSON: key}, Call: c}
	}
	first := callOf(k1)
	tests := []struct {
		name   string
		routed []*work.Item // in lane order, none written yet
		rule   *rules.Rule
		k      work.Key
		want   *work.Call
	}{
		{name: "same input", routed: []*work.Item{result(ruleA, row, first)}, rule: ruleA, k: k1, want: first},
		{name: "other input", routed: []*work.Item{result(ruleA, row, first)}, rule: ruleA, k: k2},
		{name: "other rule", routed: []*work.Item{result(ruleA, row, first)}, rule: ruleB, k: k1},
		{name: "other rule's result after it", routed: []*work.Item{result(ruleA, row, first), result(ruleB, row, callOf(k1))}, rule: ruleA, k: k1, want: first},
		{name: "the last result counts", routed: []*work.Item{result(ruleA, row, callOf(k1)), result(ruleA, row, callOf(k2))}, rule: ruleA, k: k1},
		{name: "a NULL result after it", routed: []*work.Item{result(ruleA, row, first), result(ruleA, row, nil)}, rule: ruleA, k: k1},
		{name: "no provider asked", routed: []*work.Item{result(ruleA, row, work.NewCall(0, nil))}, rule: ruleA, k: k1},
		{name: "deleted after it", routed: []*work.Item{result(ruleA, row, first), {Kind: work.Delete, Row: work.Row{JSON: row}}}, rule: ruleA, k: k1},
		{name: "moved away after it", routed: []*work.Item{result(ruleA, row, first), {Kind: work.Move, Row: work.Row{JSON: other}, Old: work.Row{JSON: row}}}, rule: ruleA, k: k1},
		{name: "moved in after it", routed: []*work.Item{result(ruleA, row, first), {Kind: work.Move, Row: work.Row{JSON: row}, Old: work.Row{JSON: other}}}, rule: ruleA, k: k1},
		{name: "truncated after it", routed: []*work.Item{result(ruleA, row, first), {Kind: work.Truncate}}, rule: ruleA, k: k1},
		{name: "another row's result", routed: []*work.Item{result(ruleA, other, first)}, rule: ruleA, k: k1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c RowCounts
			for _, it := range tc.routed {
				c.Route(lane, it)
			}
			at := c.At(lane, row, []any{1})
			if got := c.Pending(at, tc.rule.Name, tc.k); got != tc.want {
				t.Errorf("pending = %p, want %p", got, tc.want)
			}
			// Once every item is written, the row is no longer busy and
			// nothing is remembered.
			for _, it := range tc.routed {
				c.Done(lane, it.Rows()...)
			}
			if at := c.At(lane, row, []any{1}); at.Busy || c.Pending(at, tc.rule.Name, tc.k) != nil || len(c.last) != 0 {
				t.Errorf("after every item was written: busy %v, %d rows remembered", at.Busy, len(c.last))
			}
		})
	}
}
