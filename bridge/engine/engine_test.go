package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgimageai/pgimageai/bridge/apply"
	"github.com/pgimageai/pgimageai/bridge/backfill"
	"github.com/pgimageai/pgimageai/bridge/calls"
	"github.com/pgimageai/pgimageai/bridge/cost"
	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/bridge/track"
	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/internal/reconn"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

// fakeLanes records the items routed to the lanes.
type fakeLanes struct {
	items   []work.Item
	retired []string
	rows    apply.RowCounts
}

func (l *fakeLanes) Push(it work.Item)      { l.items = append(l.items, it) }
func (l *fakeLanes) Retire(lane string)     { l.retired = append(l.retired, lane) }
func (l *fakeLanes) Rows() *apply.RowCounts { return &l.rows }

// fakeCaller records the calls started, each done at once.
type fakeCaller struct{ started []string }

func (c *fakeCaller) Start(_ context.Context, r *rules.Rule, _ *cost.Lookup, img []byte, prompt string, _ bool) (*work.Call, error) {
	c.started = append(c.started, fmt.Sprintf("%s:%s:%s", r.Name, img, prompt))
	call := work.NewCall(len(img), nil)
	call.Result, call.Held = functions.Result{Text: "a cat"}, 4096
	close(call.Done)
	return call, nil
}

func (c *fakeCaller) Replay(ctx context.Context, r *rules.Rule, look *cost.Lookup, img []byte, prompt string) (*work.Call, error) {
	return c.Start(ctx, r, look, img, prompt, false)
}

func (c *fakeCaller) Answered(*rules.Rule, []byte, string, *state.BatchAnswer, *cost.Lookup) *work.Call {
	return nil
}

// noSpawn refuses to start workers: an event-level test starts none.
type noSpawn struct{ t *testing.T }

func (s noSpawn) Go(name string, _ func(context.Context) error) {
	s.t.Errorf("worker %q started", name)
}

// testEngine is an engine over fake lanes and a fake caller, with rules
// rs of source table src, reading relation rel.
func testEngine(t *testing.T, own *apply.Own, rs ...*rules.Rule) (*Engine, *fakeLanes, *fakeCaller) {
	t.Helper()
	lanes, caller := &fakeLanes{}, &fakeCaller{}
	e := New(t.Context(), noSpawn{t}, Deps{
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), TypeMap: pgtype.NewMap(), Conns: reconn.NewPair("", ""),
		Calls: caller, Cost: calls.Cost{Budget: cost.NewBudget(1 << 30)}, Lanes: lanes,
		Resume: Resume{Tracker: track.New(nil), Own: own},
	})
	e.b.rules.swap(rules.NewSet(rs))
	return e, lanes, caller
}

// got is what one item says, for comparing: kind, lane, rule, keys, and
// whether it waits for a call.
func got(it work.Item) string {
	s := it.Kind.String() + " " + it.Dest.Target.Name()
	if it.Rule != nil {
		s += " " + it.Rule.Name
	}
	if it.Row.JSON != nil {
		s += " " + string(it.Row.JSON)
	}
	if it.Old.JSON != nil {
		s += " from " + string(it.Old.JSON)
	}
	switch {
	case it.Call != nil:
		s += " call"
	case it.Kind == work.Result:
		s += " null"
	}
	if len(it.Waits) > 0 {
		s += fmt.Sprintf(" waits %d", len(it.Waits))
	}
	return s
}

// TestEngineEvents: Begin/Change/Commit in, items out. Each case is one
// source transaction; it says which items reach the lanes, in order, and
// which calls are started.
func TestEngineEvents(t *testing.T) {
	source := &catalog.Table{OID: 100, Schema: "public", Name: "photos", Regclass: "public.photos", PrimaryKey: []string{"id"},
		Identity: catalog.Identity{Kind: 'd', Key: []string{"id"}, Usable: true, PrimaryKey: true},
		Columns:  []catalog.Column{{Name: "id", TypeOID: 23, TypeMod: -1}, {Name: "img", TypeOID: rules.ByteaOID, TypeMod: -1}}}
	rel := &replication.Relation{OID: 100, Namespace: "public", Name: "photos", ReplicaIdentity: 'd', Columns: []replication.Column{
		{Name: "id", TypeOID: 23, TypeModifier: -1, Key: true}, {Name: "img", TypeOID: rules.ByteaOID, TypeModifier: -1}}}
	otherRel := &replication.Relation{OID: 200, Namespace: "public", Name: "other"}
	keyCols := []sink.KeyColumn{{Name: "id", TypeOID: 23}}
	caption := &rules.Rule{Config: rules.Config{Name: "caption", ImageColumn: "img", Model: "m", Prompt: "Describe."}, Source: source, KeyColumns: keyCols,
		Target: &sink.Target{Table: &catalog.Table{Schema: "public", Name: "captions", Regclass: "public.captions"}, Column: "caption"}, Identity: rules.Identity{Fingerprint: "f1"}}
	back := &rules.Rule{Config: rules.Config{Name: "back", ImageColumn: "img", Model: "m", Prompt: "Tag."}, Source: source, KeyColumns: keyCols,
		Target: &sink.Target{Table: source, Column: "tags", WriteBack: true}, Identity: rules.Identity{Fingerprint: "f2"}}

	id := func(n int) replication.Value {
		return replication.Value{Kind: replication.Text, Data: fmt.Appendf(nil, "%d", n)}
	}
	img := func(s string) replication.Value { return replication.Value{Kind: replication.Binary, Data: []byte(s)} }
	null := replication.Value{Kind: replication.Null}
	toast := replication.Value{Kind: replication.Unchanged}
	row := func(n int, v replication.Value) replication.Tuple { return replication.Tuple{id(n), v} }
	change := func(op replication.Op, old, cur replication.Tuple) *replication.Change {
		return &replication.Change{Op: op, LSN: 10, Relation: rel, Old: old, New: cur}
	}

	const ownXID = 77
	tests := []struct {
		name    string
		rules   []*rules.Rule
		xid     uint32
		changes []*replication.Change
		items   []string
		calls   []string
	}{
		{name: "insert: a call, its result",
			rules: []*rules.Rule{caption}, changes: []*replication.Change{change(replication.Insert, nil, row(1, img("png1")))},
			items: []string{`result public.captions caption {"id": 1} call`}, calls: []string{"caption:png1:Describe."}},
		{name: "update, image unchanged (TOAST): nothing",
			rules: []*rules.Rule{caption}, changes: []*replication.Change{change(replication.Update, nil, row(1, toast))}},
		{name: "update, image unchanged (same bytes, REPLICA IDENTITY FULL): nothing",
			rules: []*rules.Rule{caption}, changes: []*replication.Change{change(replication.Update, row(1, img("png1")), row(1, img("png1")))}},
		{name: "update, image changed: a call",
			rules: []*rules.Rule{caption}, changes: []*replication.Change{change(replication.Update, row(1, img("png1")), row(1, img("png2")))},
			items: []string{`result public.captions caption {"id": 1} call`}, calls: []string{"caption:png2:Describe."}},
		{name: "NULL image: a NULL result, no call",
			rules: []*rules.Rule{caption}, changes: []*replication.Change{change(replication.Insert, nil, row(1, null))},
			items: []string{`result public.captions caption {"id": 1} null`}},
		{name: "delete: the target row goes, a write-back target forgets",
			rules: []*rules.Rule{back, caption}, changes: []*replication.Change{change(replication.Delete, row(3, null), nil)},
			items: []string{`delete public.captions {"id": 3}`, `forget public.photos {"id": 3}`}},
		{name: "key change: a move waiting for the result's call, then the result",
			rules: []*rules.Rule{caption}, changes: []*replication.Change{change(replication.Update, row(1, img("png1")), row(2, img("png2")))},
			items: []string{`move public.captions {"id": 2} from {"id": 1} waits 1`, `result public.captions caption {"id": 2} call`},
			calls: []string{"caption:png2:Describe."}},
		{name: "key change with the image unchanged: a move only",
			rules: []*rules.Rule{caption}, changes: []*replication.Change{change(replication.Update, row(1, toast), row(2, toast))},
			items: []string{`move public.captions {"id": 2} from {"id": 1}`}},
		{name: "write-back rule: a call, no move of its own rows",
			rules: []*rules.Rule{back}, changes: []*replication.Change{change(replication.Update, row(1, img("a")), row(2, img("b")))},
			items: []string{`result public.photos back {"id": 2} call`}, calls: []string{"back:b:Tag."}},
		{name: "truncate: each target emptied, a write-back target forgets",
			rules: []*rules.Rule{back, caption}, changes: []*replication.Change{{Op: replication.Truncate, LSN: 10, Truncated: []*replication.Relation{rel, otherRel}}},
			items: []string{`truncate public.captions`, `forget public.photos`}},
		{name: "a table without rules: nothing",
			rules: []*rules.Rule{caption}, changes: []*replication.Change{{Op: replication.Insert, LSN: 10, Relation: otherRel, New: replication.Tuple{id(1)}}}},
		{name: "the bridge's own write-back transaction: nothing read again, no call",
			rules: []*rules.Rule{back, caption}, xid: ownXID, changes: []*replication.Change{
				change(replication.Update, row(1, img("a")), row(1, img("b"))), change(replication.Insert, nil, row(5, img("c"))),
				change(replication.Delete, row(6, null), nil)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, lanes, caller := testEngine(t, apply.NewOwn([]uint64{ownXID}, ownXID), tc.rules...)
			xid := tc.xid
			if xid == 0 {
				xid = ownXID + 1
			}
			events := []replication.Event{replication.Begin{XID: xid, FinalLSN: 20, CommitTime: time.Now()}}
			for _, ch := range tc.changes {
				events = append(events, ch)
			}
			events = append(events, replication.Commit{CommitLSN: 20, EndLSN: 21})
			for _, ev := range events {
				if err := e.Handle(t.Context(), ev); err != nil {
					t.Fatalf("handle %T: %v", ev, err)
				}
			}
			var items []string
			for i, it := range lanes.items {
				items = append(items, got(it))
				if i > 0 && !lanes.items[i-1].Pos.Less(it.Pos) {
					t.Errorf("item %d at %v, not after %v", i, it.Pos, lanes.items[i-1].Pos)
				}
				cost := int64(itemOverhead + len(it.Row.JSON) + len(it.Old.JSON))
				if it.Call != nil {
					cost += it.Call.Held
				}
				if it.Pos.Commit != 20 || it.Txn == nil || it.Cost != cost {
					t.Errorf("item %d placed at %v (txn %v), charged %d, want %d", i, it.Pos, it.Txn, it.Cost, cost)
				}
			}
			if strings.Join(items, "\n") != strings.Join(tc.items, "\n") {
				t.Errorf("items:\n%s\nwant:\n%s", strings.Join(items, "\n"), strings.Join(tc.items, "\n"))
			}
			if strings.Join(caller.started, "\n") != strings.Join(tc.calls, "\n") {
				t.Errorf("calls %q, want %q", caller.started, tc.calls)
			}
			if e.Changes() != int64(len(tc.changes)) {
				t.Errorf("changes counted %d, want %d", e.Changes(), len(tc.changes))
			}
		})
	}
}

// TestEngineResumedTransaction: a transaction cut off by a reconnect and
// sent again routes nothing twice, and starts no call twice.
func TestEngineResumedTransaction(t *testing.T) {
	source := &catalog.Table{OID: 100, Schema: "public", Name: "photos", Regclass: "public.photos", PrimaryKey: []string{"id"},
		Identity: catalog.Identity{Kind: 'd', Key: []string{"id"}, Usable: true, PrimaryKey: true},
		Columns:  []catalog.Column{{Name: "id", TypeOID: 23, TypeMod: -1}, {Name: "img", TypeOID: rules.ByteaOID, TypeMod: -1}}}
	rel := &replication.Relation{OID: 100, Namespace: "public", Name: "photos", ReplicaIdentity: 'd', Columns: []replication.Column{
		{Name: "id", TypeOID: 23, TypeModifier: -1, Key: true}, {Name: "img", TypeOID: rules.ByteaOID, TypeModifier: -1}}}
	r := &rules.Rule{Config: rules.Config{Name: "caption", ImageColumn: "img", Prompt: "Describe."}, Source: source, KeyColumns: []sink.KeyColumn{{Name: "id", TypeOID: 23}},
		Target: &sink.Target{Table: &catalog.Table{Schema: "public", Name: "captions", Regclass: "public.captions"}, Column: "caption"}}
	e, lanes, caller := testEngine(t, apply.NewOwn(nil, 1), r)
	ins := func(n int) *replication.Change {
		return &replication.Change{Op: replication.Insert, LSN: 10, Relation: rel, New: replication.Tuple{
			{Kind: replication.Text, Data: fmt.Appendf(nil, "%d", n)}, {Kind: replication.Binary, Data: []byte("png")}}}
	}
	begin := replication.Begin{XID: 5, FinalLSN: 20, CommitTime: time.Now()}
	for _, ev := range []replication.Event{begin, ins(1), replication.Reset{}, begin, ins(1), ins(2), replication.Commit{CommitLSN: 20, EndLSN: 21}} {
		if err := e.Handle(t.Context(), ev); err != nil {
			t.Fatalf("handle %T: %v", ev, err)
		}
	}
	if len(lanes.items) != 2 || len(caller.started) != 2 {
		t.Fatalf("%d items, %d calls; want 2 and 2 (row 1 once, row 2)", len(lanes.items), len(caller.started))
	}
	if string(lanes.items[0].Row.JSON) != `{"id": 1}` || string(lanes.items[1].Row.JSON) != `{"id": 2}` {
		t.Errorf("items of %s and %s", lanes.items[0].Row.JSON, lanes.items[1].Row.JSON)
	}
}

// TestEngineConfigChangeWaitsForCommit: a change of pgimageai.rules or
// pgimageai.models routes nothing and takes effect at its transaction's
// commit, not before.
func TestEngineConfigChangeWaitsForCommit(t *testing.T) {
	e, lanes, caller := testEngine(t, apply.NewOwn(nil, 1))
	e.b.rules.tables = Tables{Rules: 500, Models: 501, Retries: 502}
	rulesRel := &replication.Relation{OID: 500, Namespace: "pgimageai", Name: "rules"}
	modelsRel := &replication.Relation{OID: 501, Namespace: "pgimageai", Name: "models"}
	for _, ev := range []replication.Event{
		replication.Begin{XID: 5, FinalLSN: 20, CommitTime: time.Now()},
		&replication.Change{Op: replication.Insert, LSN: 10, Relation: rulesRel},
		&replication.Change{Op: replication.Update, LSN: 11, Relation: modelsRel},
		&replication.Change{Op: replication.Truncate, LSN: 12, Truncated: []*replication.Relation{rulesRel}},
	} {
		if err := e.Handle(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
	}
	cfg := e.b.out.open.config
	if len(cfg) != 3 || cfg[0].Models || !cfg[1].Models || cfg[2].Ch.Op != replication.Truncate {
		t.Fatalf("configuration changes queued: %+v", cfg)
	}
	if len(lanes.items) != 0 || len(caller.started) != 0 {
		t.Errorf("%d items, %d calls for configuration changes", len(lanes.items), len(caller.started))
	}
}

// TestEngineStreamedRowsLeaveThePage: a row the stream changed after a
// backfill started is the stream's — the page read before leaves it — and
// a truncate since the start drops the page's rows.
func TestEngineStreamedRowsLeaveThePage(t *testing.T) {
	tests := []struct {
		name     string
		change   func(rel *replication.Relation) *replication.Change
		fromPage []string // the page's rows still routed
	}{
		{name: "nothing streamed", fromPage: []string{`{"id": 1}`, `{"id": 2}`}},
		{name: "row 1 updated", change: func(rel *replication.Relation) *replication.Change {
			return &replication.Change{Op: replication.Update, LSN: 10, Relation: rel, New: replication.Tuple{{Kind: replication.Text, Data: []byte("1")}, {Kind: replication.Binary, Data: []byte("new")}}}
		}, fromPage: []string{`{"id": 2}`}},
		{name: "row 2 deleted", change: func(rel *replication.Relation) *replication.Change {
			return &replication.Change{Op: replication.Delete, LSN: 10, Relation: rel, Old: replication.Tuple{{Kind: replication.Text, Data: []byte("2")}, {Kind: replication.Null}}}
		}, fromPage: []string{`{"id": 1}`}},
		{name: "truncated", change: func(rel *replication.Relation) *replication.Change {
			return &replication.Change{Op: replication.Truncate, LSN: 10, Truncated: []*replication.Relation{rel}}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := markerRule(t, "caption", "fp")
			r.Source = &catalog.Table{OID: 100, Schema: "public", Name: "photos", Regclass: "public.photos", PrimaryKey: []string{"id"},
				Identity: catalog.Identity{Kind: 'd', Key: []string{"id"}, Usable: true, PrimaryKey: true},
				Columns:  []catalog.Column{{Name: "id", TypeOID: 23, TypeMod: -1}, {Name: "img", TypeOID: rules.ByteaOID, TypeMod: -1}}}
			r.KeyColumns = []sink.KeyColumn{{Name: "id", TypeOID: 23}}
			rel := &replication.Relation{OID: 100, Namespace: "public", Name: "photos", ReplicaIdentity: 'd', Columns: []replication.Column{
				{Name: "id", TypeOID: 23, TypeModifier: -1, Key: true}, {Name: "img", TypeOID: rules.ByteaOID, TypeModifier: -1}}}
			e, lanes, _ := testEngine(t, apply.NewOwn(nil, 1), r)
			e.bf.since.begin(r.Name, 100)
			e.bf.runs[r.Name], e.bf.workers[r.Name] = "run1", func() {}
			begin(t, e)
			if tc.change != nil {
				if err := e.Handle(t.Context(), tc.change(rel)); err != nil {
					t.Fatal(err)
				}
			}
			streamed := len(lanes.items)
			rows := []backfill.Row{{Key: []any{1}, KeyJSON: []byte(`{"id": 1}`)}, {Key: []any{2}, KeyJSON: []byte(`{"id": 2}`)}}
			e.Register(&backfill.Page{ID: "p", Rule: r.Name, Run: "run1", Fingerprint: "fp", Rows: rows, LastKey: []byte(`{"id": 2}`), Applied: make(chan struct{})})
			if err := e.Handle(t.Context(), &replication.Message{Transactional: true, Prefix: backfill.Prefix, Content: []byte(`{"page": "p"}`), LSN: 30}); err != nil {
				t.Fatal(err)
			}
			var fromPage []string
			for _, it := range lanes.items[streamed:] {
				if it.Kind == work.Result {
					fromPage = append(fromPage, string(it.Row.JSON))
				}
			}
			if strings.Join(fromPage, " ") != strings.Join(tc.fromPage, " ") {
				t.Errorf("page routed %q, want %q", fromPage, tc.fromPage)
			}
			if last := lanes.items[len(lanes.items)-1]; last.Kind != work.Backfill || last.Progress.Rows != 2 {
				t.Errorf("last item %s, rows %d: the page's progress counts every row read", last.Kind, last.Progress.Rows)
			}
		})
	}
}
