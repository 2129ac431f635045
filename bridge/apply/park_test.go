package apply

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

// parkedRules is a Parked of fixed rules.
type parkedRules struct {
	maybe   map[string]bool
	parking []string
}

func (p *parkedRules) Maybe(rule string) bool { return p.maybe[rule] }
func (p *parkedRules) Parking(rule string)    { p.parking = append(p.parking, rule) }

// TestBatchParks: a row whose model is down parks (and writes nothing to
// the target); any later write for a row of a rule with parked rows — a
// result, a NULL, an errors row, an unchanged input, a delete, a truncate,
// a key move — deletes (or moves) its parked row in the same transaction,
// in the row's order, so a parked older change never lands after a newer
// one; rules with nothing parked pay no statement for it.
func TestBatchParks(t *testing.T) {
	a := testRule(t, functions.Complete, 0)
	a.Name = "a"
	row := func(id int) work.Row { return work.Row{Key: []any{id}, JSON: []byte(fmt.Sprintf(`{"id": %d}`, id))} }
	result := func(id int, err error, replay bool) work.Item {
		res := functions.Result{Text: "x"}
		if err != nil {
			res = functions.Result{Null: true}
		}
		return work.Item{Kind: work.Result, Rule: a.Ref(), Dest: work.Dest{Target: a.Target}, Row: row(id), Call: done(res, err), Replay: replay}
	}
	parked := &work.Parked{Model: "m", Cause: "connection refused"}
	unchanged := result(3, nil, false)
	unchanged.Call.Unchanged = true
	fail := &functions.Error{Reason: functions.ProviderError, Detail: "HTTP 400", ImageBytes: 5}
	tests := []struct {
		name    string
		maybe   bool
		items   []work.Item
		want    string
		parking int
		replay  []bool // of each Park op
	}{
		{name: "parks, writes nothing else", items: []work.Item{result(1, parked, false), result(2, parked, false)},
			want: "Park(a:1) Park(a:2)", parking: 2, replay: []bool{false, false}},
		{name: "a replay parked again keeps its place", maybe: true, items: []work.Item{result(1, parked, true)},
			want: "Park(a:1)", parking: 1, replay: []bool{true}},
		{name: "nothing parked: no statement", items: []work.Item{result(1, nil, false), unchanged},
			want: "sink.Upsert state.ResultInput state.Resolve"},
		{name: "a newer result unparks, in order", maybe: true, items: []work.Item{result(1, parked, false), result(1, nil, false)},
			want: "Park(a:1) Unpark(a:1) sink.Upsert state.ResultInput state.Resolve", parking: 1, replay: []bool{false}},
		{name: "a newer park after a result", maybe: true, items: []work.Item{result(1, nil, false), result(1, parked, false)},
			want: "Unpark(a:1) sink.Upsert state.ResultInput state.Resolve Park(a:1)", parking: 1, replay: []bool{false}},
		{name: "an errors row unparks", maybe: true, items: []work.Item{result(2, fail, false)},
			want: "Unpark(a:2) sink.Upsert state.ResultInput Error(a:2)"},
		{name: "an unchanged input unparks", maybe: true, items: []work.Item{unchanged}, want: "Unpark(a:3)"},
		{name: "a delete unparks", maybe: true, items: []work.Item{{Kind: work.Delete, Dest: work.Dest{Target: a.Target, Rules: []string{"a"}}, Row: row(4)}},
			want: "Delete ForgetRow UnparkRows(a:4)"},
		{name: "a truncate unparks all", maybe: true, items: []work.Item{{Kind: work.Truncate, Dest: work.Dest{Target: a.Target, Rules: []string{"a"}}}},
			want: "sink.Truncate ForgetRow UnparkRows(a:*)"},
		{name: "a move moves it", maybe: true, items: []work.Item{{Kind: work.Move, Dest: work.Dest{Target: a.Target, Rules: []string{"a"}}, Row: row(6), Old: row(5)}},
			want: "sink.Move state.RekeyErrors RekeyParked(a:5>6)"},
		{name: "a gone row unparks", maybe: true, items: []work.Item{{Kind: work.Unpark, Rule: a.Ref(), Dest: work.Dest{Target: a.Target}, Row: row(7)}},
			want: "Unpark(a:7)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &parkedRules{maybe: map[string]bool{"a": tc.maybe}}
			bt := batch{parked: p}
			for i := range tc.items {
				bt.add(&tc.items[i])
			}
			ops := bt.final(nil)
			if got := describeParkOps(ops); got != tc.want {
				t.Errorf("ops\n  %s\nwant\n  %s", got, tc.want)
			}
			if len(p.parking) != tc.parking {
				t.Errorf("told of %d parkings, want %d", len(p.parking), tc.parking)
			}
			var replay []bool
			for _, op := range ops {
				if pk, ok := op.(state.Park); ok {
					replay = append(replay, pk.Replay)
					if pk.Model != "m" || pk.Cause != "connection refused" {
						t.Errorf("park %+v", pk)
					}
				}
			}
			if fmt.Sprint(replay) != fmt.Sprint(tc.replay) && !(len(replay) == 0 && len(tc.replay) == 0) {
				t.Errorf("parks replay %v, want %v", replay, tc.replay)
			}
		})
	}
}

// describeParkOps is describeOps with the parked rows' ops named.
func describeParkOps(ops []sink.Op) string {
	id := func(k []byte) string {
		if k == nil {
			return "*"
		}
		var n int
		fmt.Sscanf(string(k), `{"id": %d}`, &n)
		return fmt.Sprint(n)
	}
	var out []string
	for _, op := range ops {
		switch o := op.(type) {
		case state.Park:
			out = append(out, fmt.Sprintf("Park(%s:%s)", o.Rule, id(o.Key)))
		case state.Unpark:
			out = append(out, fmt.Sprintf("Unpark(%s:%s)", o.Rule, id([]byte(o.Keys[0]))))
		case state.UnparkRows:
			out = append(out, fmt.Sprintf("UnparkRows(%s:%s)", strings.Join(o.Rules, ","), id(o.Key)))
		case state.RekeyParked:
			out = append(out, fmt.Sprintf("RekeyParked(%s:%s>%s)", strings.Join(o.Rules, ","), id(o.OldKey), id(o.NewKey)))
		default:
			if d := describeOps([]sink.Op{op}); d != "" {
				out = append(out, d)
			}
		}
	}
	return strings.Join(out, " ")
}
