package park

import (
	"testing"

	"github.com/pgimageai/pgimageai/state"
)

// TestRulesMaybe: a rule is taken as parked from its first parking on, and
// only a count that began after its last parking and found none clears it.
func TestRulesMaybe(t *testing.T) {
	tests := []struct {
		name    string
		steps   func(r *Rules)
		rule    string
		want    bool
		counted int64
	}{
		{name: "never parked", steps: func(*Rules) {}, rule: "a", want: false},
		{name: "parking", steps: func(r *Rules) { r.Parking("a") }, rule: "a", want: true},
		{name: "counted rows", steps: func(r *Rules) { r.counted(r.mark(), []state.ParkedCount{{Rule: "a", Rows: 3}}) }, rule: "a", want: true, counted: 3},
		{name: "a count of none after the parking clears it", steps: func(r *Rules) {
			r.Parking("a")
			r.counted(r.mark(), nil)
		}, rule: "a", want: false},
		{name: "a count begun before a parking does not clear it", steps: func(r *Rules) {
			m := r.mark()
			r.Parking("a")
			r.counted(m, nil)
		}, rule: "a", want: true},
		{name: "other rules are their own", steps: func(r *Rules) { r.Parking("b") }, rule: "a", want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRules()
			tc.steps(r)
			if got := r.Maybe(tc.rule); got != tc.want {
				t.Errorf("Maybe(%s) = %v, want %v", tc.rule, got, tc.want)
			}
			var n int64
			for _, c := range r.Counts() {
				if c.Rule == tc.rule {
					n = c.Rows
				}
			}
			if n != tc.counted {
				t.Errorf("counted %d, want %d", n, tc.counted)
			}
		})
	}
	var none *Rules
	if none.Maybe("a") || none.Counts() != nil {
		t.Error("a nil Rules has parked rows")
	}
}

// TestTake: only a marker the Drainer placed, once, gives a page.
func TestTake(t *testing.T) {
	d := New(Config{})
	d.pending["n1"] = &Page{Model: "m", done: make(chan Applied, 1)}
	tests := []struct {
		name    string
		content string
		ok      bool
	}{
		{name: "placed", content: `{"page":"n1"}`, ok: true},
		{name: "taken already", content: `{"page":"n1"}`},
		{name: "unknown nonce", content: `{"page":"forged"}`},
		{name: "not json", content: `page n1`},
		{name: "empty", content: `{}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, ok := d.Take([]byte(tc.content)); ok != tc.ok {
				t.Errorf("Take(%s) = %v, want %v", tc.content, ok, tc.ok)
			}
		})
	}
}
