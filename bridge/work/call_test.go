package work

import (
	"errors"
	"testing"

	"github.com/pgimageai/pgimageai/functions"
)

// TestCallFollow: a call takes the outcome of the call it follows when that
// one succeeded — a result, or the stored input found unchanged — and not
// its failure, which it makes again.
func TestCallFollow(t *testing.T) {
	done := func(c *Call) *Call { close(c.Done); return c }
	tests := []struct {
		name      string
		prev      *Call
		want      bool
		unchanged bool
		text      string
	}{
		{name: "result", prev: done(&Call{Done: make(chan struct{}), Result: functions.Result{Text: "a cat"}}), want: true, text: "a cat"},
		{name: "unchanged", prev: done(&Call{Done: make(chan struct{}), Unchanged: true, Hit: true}), want: true, unchanged: true},
		{name: "failed", prev: done(&Call{Done: make(chan struct{}), Result: functions.Result{Null: true}, Err: errors.New("503")}), want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCall(0, nil)
			if got := c.Follow(tc.prev); got != tc.want {
				t.Fatalf("follow = %v, want %v", got, tc.want)
			}
			if !tc.want {
				if c.Hit || c.Unchanged || c.Result.Text != "" {
					t.Errorf("a failed call's outcome was taken: %+v", c)
				}
				return
			}
			if !c.Hit || c.Unchanged != tc.unchanged || c.Result.Text != tc.text {
				t.Errorf("followed: hit %v, unchanged %v, text %q; want hit, %v, %q", c.Hit, c.Unchanged, c.Result.Text, tc.unchanged, tc.text)
			}
		})
	}
}
