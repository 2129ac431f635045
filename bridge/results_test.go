package bridge

import (
	"errors"
	"testing"

	"github.com/pgimageai/pgimageai/functions"
)

// TestRowCountsPending: a change at a busy row follows the call of the last
// result routed for the row and rule when it had the same input and nothing
// after it moved, deleted or truncated the row.
func TestRowCountsPending(t *testing.T) {
	const lane = "public.captions"
	ruleA, ruleB := &Rule{Name: "a"}, &Rule{Name: "b"}
	k1, k2 := keyOf(functions.Complete, "m", "p", []byte("one")), keyOf(functions.Complete, "m", "p", []byte("two"))
	row, other := []byte(`{"id": 1}`), []byte(`{"id": 2}`)
	callOf := func(k cacheKey) *call { return &call{done: make(chan struct{}), key: &k} }
	result := func(r *Rule, key []byte, c *call) *item {
		return &item{kind: itemResult, rule: r, keyJSON: key, call: c}
	}
	first := callOf(k1)
	tests := []struct {
		name   string
		routed []*item // in lane order, none written yet
		rule   *Rule
		k      cacheKey
		want   *call
	}{
		{name: "same input", routed: []*item{result(ruleA, row, first)}, rule: ruleA, k: k1, want: first},
		{name: "other input", routed: []*item{result(ruleA, row, first)}, rule: ruleA, k: k2},
		{name: "other rule", routed: []*item{result(ruleA, row, first)}, rule: ruleB, k: k1},
		{name: "other rule's result after it", routed: []*item{result(ruleA, row, first), result(ruleB, row, callOf(k1))}, rule: ruleA, k: k1, want: first},
		{name: "the last result counts", routed: []*item{result(ruleA, row, callOf(k1)), result(ruleA, row, callOf(k2))}, rule: ruleA, k: k1},
		{name: "a NULL result after it", routed: []*item{result(ruleA, row, first), result(ruleA, row, nil)}, rule: ruleA, k: k1},
		{name: "no provider asked", routed: []*item{result(ruleA, row, &call{done: make(chan struct{})})}, rule: ruleA, k: k1},
		{name: "deleted after it", routed: []*item{result(ruleA, row, first), {kind: itemDelete, keyJSON: row}}, rule: ruleA, k: k1},
		{name: "moved away after it", routed: []*item{result(ruleA, row, first), {kind: itemMove, keyJSON: other, oldKeyJSON: row}}, rule: ruleA, k: k1},
		{name: "moved in after it", routed: []*item{result(ruleA, row, first), {kind: itemMove, keyJSON: row, oldKeyJSON: other}}, rule: ruleA, k: k1},
		{name: "truncated after it", routed: []*item{result(ruleA, row, first), {kind: itemTruncate}}, rule: ruleA, k: k1},
		{name: "another row's result", routed: []*item{result(ruleA, other, first)}, rule: ruleA, k: k1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c rowCounts
			for _, it := range tc.routed {
				c.route(lane, it)
			}
			at := c.at(lane, row, []any{1})
			if got := c.pending(at, tc.rule.Name, tc.k); got != tc.want {
				t.Errorf("pending = %p, want %p", got, tc.want)
			}
			// Once every item is written, the row is no longer busy and
			// nothing is remembered.
			for _, it := range tc.routed {
				c.done(lane, rowsOf(it)...)
			}
			if at := c.at(lane, row, []any{1}); at.busy || c.pending(at, tc.rule.Name, tc.k) != nil || len(c.last) != 0 {
				t.Errorf("after every item was written: busy %v, %d rows remembered", at.busy, len(c.last))
			}
		})
	}
}

// TestCallFollow: a call takes the outcome of the call it follows when that
// one succeeded — a result, or the stored input found unchanged — and not
// its failure, which it makes again.
func TestCallFollow(t *testing.T) {
	done := func(c *call) *call { close(c.done); return c }
	tests := []struct {
		name      string
		prev      *call
		want      bool
		unchanged bool
		text      string
	}{
		{name: "result", prev: done(&call{done: make(chan struct{}), result: functions.Result{Text: "a cat"}}), want: true, text: "a cat"},
		{name: "unchanged", prev: done(&call{done: make(chan struct{}), unchanged: true, hit: true}), want: true, unchanged: true},
		{name: "failed", prev: done(&call{done: make(chan struct{}), result: functions.Result{Null: true}, err: errors.New("503")}), want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &call{done: make(chan struct{})}
			if got := c.follow(tc.prev); got != tc.want {
				t.Fatalf("follow = %v, want %v", got, tc.want)
			}
			if !tc.want {
				if c.hit || c.unchanged || c.result.Text != "" {
					t.Errorf("a failed call's outcome was taken: %+v", c)
				}
				return
			}
			if !c.hit || c.unchanged != tc.unchanged || c.result.Text != tc.text {
				t.Errorf("followed: hit %v, unchanged %v, text %q; want hit, %v, %q", c.hit, c.unchanged, c.result.Text, tc.unchanged, tc.text)
			}
		})
	}
}
