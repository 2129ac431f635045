package engine

import (
	"context"
	"slices"
	"testing"

	"github.com/pgimageai/pgimageai/bridge/apply"
	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/sink"
)

// fakeBackfills records the backfills started and stopped.
type fakeBackfills struct{ started, stopped []string }

func (f *fakeBackfills) start(_ context.Context, r *rules.Rule) error {
	f.started = append(f.started, r.Name)
	return nil
}
func (f *fakeBackfills) stop(name string)                    { f.stopped = append(f.stopped, name) }
func (f *fakeBackfills) deferUntilSlot()                     {}
func (f *fakeBackfills) cleanup(context.Context, rules.Diff) {}

// fakeSides records the diffs followed; switched names the rules switched
// at the marker being applied.
type fakeSides struct {
	switchedNow map[string]bool
	followed    int
}

func (f *fakeSides) switched(name string) bool { return f.switchedNow[name] }
func (f *fakeSides) follow(context.Context, rules.Diff) error {
	f.followed++
	return nil
}

// TestApplyDiff: a reload's diff swaps the rules in, stops the backfills
// of the rules stopped, retires the lanes no rule writes any more, starts
// the backfills of the rules started — but not of a rule switched at the
// marker, whose rows are its side rule's — and follows the side work.
func TestApplyDiff(t *testing.T) {
	rule := func(name, target string) *rules.Rule {
		return &rules.Rule{Config: rules.Config{Name: name, Model: "m"}, Source: &catalog.Table{OID: 1, Regclass: "public.s"},
			Target: &sink.Target{Table: &catalog.Table{Regclass: target}}}
	}
	a, b, gone := rule("a", "public.ta"), rule("b", "public.tb"), rule("gone", "public.tgone")
	a2 := rule("a", "public.ta")
	tests := []struct {
		name     string
		switched map[string]bool
		started  []string
	}{
		{name: "changed and new rules backfill", started: []string{"a", "b"}},
		{name: "a rule switched at the marker does not", switched: map[string]bool{"a": true}, started: []string{"b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, lanes, _ := testEngine(t, apply.NewOwn(nil, 1), a, gone)
			bf, sw := &fakeBackfills{}, &fakeSides{switchedNow: tc.switched}
			e.cfg.bf, e.cfg.sw = bf, sw
			next := rules.NewSet([]*rules.Rule{a2, b})
			d := rules.Diff{Set: next, Stop: []string{"a", "gone"}, Start: []*rules.Rule{a2, b}}
			if err := e.cfg.apply(t.Context(), d); err != nil {
				t.Fatal(err)
			}
			if e.b.rules.set != next || e.b.rules.current.Load() != next {
				t.Error("the diff's rules are not the engine's")
			}
			if !slices.Equal(bf.stopped, []string{"a", "gone"}) {
				t.Errorf("stopped %q", bf.stopped)
			}
			if !slices.Equal(lanes.retired, []string{"public.tgone"}) {
				t.Errorf("retired %q, want the lane of the rule gone only", lanes.retired)
			}
			if !slices.Equal(bf.started, tc.started) {
				t.Errorf("started %q, want %q", bf.started, tc.started)
			}
			if sw.followed != 1 {
				t.Errorf("side work followed %d times", sw.followed)
			}
			if m := e.RuleModels(); m["a"] != "m" || m["b"] != "m" || len(m) != 2 {
				t.Errorf("rule models %v", m)
			}
		})
	}
}
