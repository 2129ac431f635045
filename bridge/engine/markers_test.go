package engine

import (
	"context"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/bridge/apply"
	"github.com/pgimageai/pgimageai/bridge/backfill"
	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/bridge/switchover"
	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

func markerRule(t *testing.T, name, fp string) *rules.Rule {
	t.Helper()
	opts, _ := provider.ParseOptions(nil)
	var p provider.Provider = struct{ provider.TextGenerator }{}
	prompt := "Describe."
	fn, err := functions.Bind(functions.Complete, "m", p, opts, &prompt)
	if err != nil {
		t.Fatal(err)
	}
	source := &catalog.Table{OID: 100, Schema: "public", Name: "photos", Regclass: "public.photos"}
	return &rules.Rule{Config: rules.Config{Name: name, ImageColumn: "img", Prompt: "Describe."}, Source: source, Fn: fn,
		Target:   &sink.Target{Table: &catalog.Table{Schema: "public", Name: "captions", Regclass: "public.captions"}, Column: "caption"},
		Identity: rules.Identity{Fingerprint: fp}}
}

// begin opens a source transaction on e, for a marker to be applied in.
func begin(t *testing.T, e *Engine) {
	t.Helper()
	if err := e.Handle(t.Context(), replication.Begin{XID: 9, FinalLSN: 40, CommitTime: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

// TestBackfillPage: a page is applied at its marker — its rows as results,
// then its progress with the page's last key, which the backfill resumes
// after — unless it is of another run or of a rule that changed since.
func TestBackfillPage(t *testing.T) {
	rows := []backfill.Row{
		{Key: []any{1}, KeyJSON: []byte(`{"id": 1}`), Img: []byte("png"), Valid: true, Size: 3, Prompt: "Describe."},
		{Key: []any{2}, KeyJSON: []byte(`{"id": 2}`)},
	}
	tests := []struct {
		name  string
		run   string // the page's run; the worker's is "run1"
		fp    string // the page's fingerprint; the rule's is "fp"
		done  bool
		items []string
	}{
		{name: "applied", run: "run1", fp: "fp", items: []string{`result public.captions caption {"id": 1} call`, `result public.captions caption {"id": 2} null`, `backfill public.captions caption`}},
		{name: "the last page", run: "run1", fp: "fp", done: true, items: []string{`result public.captions caption {"id": 1} call`, `result public.captions caption {"id": 2} null`, `backfill public.captions caption`}},
		{name: "of an earlier run", run: "run0", fp: "fp"},
		{name: "of the rule before it changed", run: "run1", fp: "old"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := markerRule(t, "caption", "fp")
			e, lanes, caller := testEngine(t, apply.NewOwn(nil, 1), r)
			e.bf.runs[r.Name] = "run1"
			e.bf.workers[r.Name] = func() {}
			p := &backfill.Page{ID: "p1", Rule: r.Name, Run: tc.run, Fingerprint: tc.fp, Rows: rows, LastKey: []byte(`{"id": 2}`), Done: tc.done, Applied: make(chan struct{})}
			e.Register(p)
			begin(t, e)
			m := &replication.Message{Transactional: true, Prefix: backfill.Prefix, Content: []byte(`{"page": "p1"}`), LSN: 30}
			if err := e.Handle(t.Context(), m); err != nil {
				t.Fatal(err)
			}
			select {
			case <-p.Applied:
			default:
				t.Fatal("the page is not marked applied: its worker would wait for ever")
			}
			var items []string
			for _, it := range lanes.items {
				items = append(items, got(it))
			}
			if len(items) != len(tc.items) {
				t.Fatalf("items %q, want %q", items, tc.items)
			}
			for i := range items {
				if items[i] != tc.items[i] {
					t.Errorf("item %d: %q, want %q", i, items[i], tc.items[i])
				}
			}
			if len(tc.items) == 0 {
				if len(caller.started) != 0 {
					t.Errorf("calls %q for a page not applied", caller.started)
				}
				return
			}
			pr := lanes.items[len(lanes.items)-1].Progress
			want := state.BackfillProgress{Rule: r.Name, Fingerprint: "fp", LastKey: []byte(`{"id": 2}`), Rows: 2, Done: tc.done}
			if pr.Rule != want.Rule || pr.Fingerprint != want.Fingerprint || string(pr.LastKey) != string(want.LastKey) || pr.Rows != want.Rows || pr.Done != want.Done {
				t.Errorf("progress %+v, want %+v", pr, want)
			}
			if _, running := e.bf.workers[r.Name]; running == tc.done {
				t.Errorf("worker running = %v after a page with done %v", running, tc.done)
			}
		})
	}
}

// fakeReloader records the reloads asked for; reload makes set the rules.
type fakeReloader struct {
	e       *Engine
	set     *rules.Set
	whats   []string
	misfits []map[string]string
}

func (f *fakeReloader) reconfigure(_ context.Context, what string, _ func() error) error {
	f.whats = append(f.whats, what)
	if f.set != nil {
		f.e.b.rules.swap(f.set)
	}
	return nil
}

func (f *fakeReloader) misfit(_ context.Context, why map[string]string) error {
	f.misfits = append(f.misfits, why)
	return nil
}

// TestSwitchNow: a switch marker switches the rule — one Switch item at the
// marker, after the reload that swaps in the switched rule — only while
// the side rule is the one the watcher reported ready (its fingerprint);
// a side rule changed since goes on with its new side work.
func TestSwitchNow(t *testing.T) {
	sw := &rules.Switching{Rule: "caption", SideRule: "caption~v2", From: "v1", To: "v2", Live: "caption", Shadow: "caption_v2", Side: true}
	tests := []struct {
		name     string
		sideFP   string // the report's; the side rule's is "side2"
		side     bool   // the side rule is valid
		switches bool
	}{
		{name: "ready", sideFP: "side2", side: true, switches: true},
		{name: "the side rule changed since the report", sideFP: "side1", side: true},
		{name: "the side rule went", sideFP: "side2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			live := markerRule(t, "caption", "live1")
			live.Version = "v1"
			side := markerRule(t, "caption~v2", "side2")
			side.Target = &sink.Target{Table: live.Target.Table, Column: "caption_v2"}
			side.Switching = sw
			rs := []*rules.Rule{live}
			if tc.side {
				rs = append(rs, side)
			}
			e, lanes, _ := testEngine(t, apply.NewOwn(nil, 1), rs...)
			switched := markerRule(t, "caption", "live2")
			switched.Version = "v2"
			fr := &fakeReloader{e: e, set: rules.NewSet([]*rules.Rule{switched})}
			e.sw.cfg = fr
			begin(t, e)
			e.sw.atMarker, e.sw.sub = &replication.Message{LSN: 30}, 0
			rep := switchover.Report{Watch: switchover.Watch{Rule: "caption", Side: "caption~v2", SideFP: tc.sideFP, To: "v2"}}
			if err := e.sw.switchNow(t.Context(), rep); err != nil {
				t.Fatal(err)
			}
			if !tc.switches {
				if len(fr.whats) != 0 || len(lanes.items) != 0 {
					t.Fatalf("switched anyway: reloads %q, items %d", fr.whats, len(lanes.items))
				}
				return
			}
			if len(fr.whats) != 1 || len(lanes.items) != 1 {
				t.Fatalf("reloads %q, items %d; want one of each", fr.whats, len(lanes.items))
			}
			it := lanes.items[0]
			if it.Kind != work.Switch || it.Rule.Fingerprint != "live2" || it.LSN != 30 {
				t.Errorf("item %s of %+v at %s, want the switch of the switched rule at the marker", it.Kind, it.Rule, it.LSN)
			}
			if s, ok := it.Ops[1].(sink.Switch); !ok || s.Live != "caption" || s.Shadow != "caption_v2" {
				t.Errorf("ops %+v", it.Ops)
			}
			if e.sw.atSwitch["caption"] {
				t.Error("the rule is still marked as switching after the switch")
			}
		})
	}
}

// TestDropNow: given-up side work is dropped at the marker being applied —
// one DropShadow item in its target's lane, with its bookkeeping — unless
// the same side work runs again (its rule came back).
func TestDropNow(t *testing.T) {
	drop := rules.Drop{Rule: "caption", Side: "caption~v2", From: "v1", To: "v2", TargetTable: "public.captions", Live: "caption", Shadow: "caption_v2"}
	tests := []struct {
		name    string
		sideTo  string // the To of the side rule running now; "" none
		dropped bool
	}{
		{name: "given up", dropped: true},
		{name: "given up for another version", sideTo: "v3", dropped: true},
		{name: "the same side work runs again", sideTo: "v2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			live := markerRule(t, "caption", "live1")
			rs := []*rules.Rule{live}
			if tc.sideTo != "" {
				side := markerRule(t, "caption~v2", "side")
				side.Switching = &rules.Switching{Rule: "caption", SideRule: "caption~v2", From: "v1", To: tc.sideTo, Side: true}
				rs = append(rs, side)
			}
			e, lanes, _ := testEngine(t, apply.NewOwn(nil, 1), rs...)
			begin(t, e)
			e.sw.atMarker, e.sw.sub = &replication.Message{LSN: 30}, 0
			if err := e.sw.dropNow(t.Context(), drop); err != nil {
				t.Fatal(err)
			}
			if !tc.dropped {
				if len(lanes.items) != 0 {
					t.Fatalf("%d items: the running side work was dropped", len(lanes.items))
				}
				return
			}
			if len(lanes.items) != 1 {
				t.Fatalf("%d items, want the drop", len(lanes.items))
			}
			it := lanes.items[0]
			ds, ok := it.Ops[0].(sink.DropShadow)
			gone, ok2 := it.Ops[1].(state.SideGone)
			if it.Kind != work.DropShadow || it.Dest.Target.Name() != "public.captions" || !ok || ds.Shadow != "caption_v2" || !ok2 || gone.Side != "caption~v2" || gone.To != "v2" {
				t.Errorf("item %s to %s, ops %+v", it.Kind, it.Dest.Target.Name(), it.Ops)
			}
		})
	}
}
