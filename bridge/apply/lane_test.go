package apply

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgimageai/pgimageai/bridge/cost"
	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/bridge/track"
	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/internal/supervise"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

// fakeWriter records batches; fail makes the first writes fail.
type fakeWriter struct {
	mu      sync.Mutex
	batches [][]sink.Op
	pos     []state.Position
	fail    int
	wrote   chan struct{} // signalled after each write, when set
	closes  int
	forgot  int
}

func (w *fakeWriter) Write(_ context.Context, ops []sink.Op, pos state.Position, _ time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fail > 0 {
		w.fail--
		return errors.New("target refuses writes")
	}
	w.batches = append(w.batches, append([]sink.Op(nil), ops...))
	w.pos = append(w.pos, pos)
	if w.wrote != nil {
		w.wrote <- struct{}{}
	}
	return nil
}

func (w *fakeWriter) Forget(context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.forgot++
	return nil
}

func (w *fakeWriter) Close(context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closes++
	return nil
}

func (w *fakeWriter) written() ([][]sink.Op, []state.Position) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([][]sink.Op(nil), w.batches...), append([]state.Position(nil), w.pos...)
}

func unchanged() *work.Call {
	c := done(functions.Result{}, nil)
	c.Unchanged = true
	return c
}

func done(r functions.Result, err error) *work.Call {
	c := &work.Call{Done: make(chan struct{}), Result: r, Err: err, Size: 3, Head: []byte{1, 2, 3}, Key: &work.Key{1}}
	close(c.Done)
	return c
}

func testRule(t *testing.T, fn functions.Name, dim int) *rules.Rule {
	t.Helper()
	opts, _ := provider.ParseOptions(nil)
	var p provider.Provider = struct {
		provider.TextGenerator
		provider.Embedder
	}{}
	var prompt *string
	if fn == functions.Complete {
		s := "p"
		prompt = &s
	}
	f, err := functions.Bind(fn, "m", p, opts, prompt)
	if err != nil {
		t.Fatal(err)
	}
	table := &catalog.Table{Schema: "public", Name: "t", Regclass: "public.t"}
	return &rules.Rule{Config: rules.Config{Name: "r", Model: "m"}, Fn: f, Target: &sink.Target{Table: table, Column: "c", Dim: dim}}
}

// testLanes returns a lanes registry whose writers are w, with a tracker
// that records acks.
func testLanes(t *testing.T, w *fakeWriter, maxOps int, acks *[]replication.LSN, mu *sync.Mutex) *Lanes {
	t.Helper()
	sp := testSpawner(t)
	tr := track.New(func(l replication.LSN) { mu.Lock(); *acks = append(*acks, l); mu.Unlock() })
	return New(sp, Config{Log: slog.New(slog.DiscardHandler), NewWriter: func(string) Writer { return w },
		Budget: cost.NewBudget(1 << 20), Tracker: tr, MaxOps: maxOps, Backoff: time.Millisecond})
}

// itemCost is what a test item holds of the budget; eventBits places items
// in the stream as the engine does (state.Position.Ord).
const (
	itemCost  = 1 << 10
	eventBits = 24
)

func resultItem(r *rules.Rule, id int, c *work.Call, rec *track.Txn, pos state.Position) work.Item {
	return work.Item{Kind: work.Result, Rule: r.Ref(), Dest: work.Dest{Target: r.Target}, Row: work.Row{Key: []any{id}, JSON: []byte(fmt.Sprintf(`{"id": %d}`, id))},
		Call: c, Place: work.Place{Txn: rec, Pos: pos, Cost: itemCost}}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestLaneWritesInOrderAsReady(t *testing.T) {
	r := testRule(t, functions.Complete, 0)
	w := &fakeWriter{fail: 1}
	var acks []replication.LSN
	var mu sync.Mutex
	ls := testLanes(t, w, 100, &acks, &mu)
	ls.cfg.Budget.Acquire(context.Background(), 3*itemCost)
	tr := ls.cfg.Tracker
	t1, t2, t3 := tr.Begin(time.Time{}), tr.Begin(time.Time{}), tr.Begin(time.Time{})
	slow := work.NewCall(0, nil)
	l := ls.get(r.Target.Name())
	for _, it := range []work.Item{
		resultItem(r, 1, done(functions.Result{Text: "a"}, nil), t1, state.Position{Commit: 10, Ord: 1 << eventBits}),
		resultItem(r, 2, slow, t2, state.Position{Commit: 20, Ord: 1 << eventBits}),
		resultItem(r, 3, done(functions.Result{Text: "c"}, nil), t3, state.Position{Commit: 30, Ord: 1 << eventBits}),
	} {
		tr.Add(it.Txn)
		l.push(it)
	}
	tr.Seal(t1, 11)
	tr.Seal(t2, 21)
	tr.Seal(t3, 31)
	// The first item is written alone (after one failed attempt): the
	// second is not ready, and the third must not overtake it.
	waitFor(t, "the first write", func() bool { b, _ := w.written(); return len(b) == 1 })
	time.Sleep(20 * time.Millisecond)
	if b, _ := w.written(); len(b) != 1 {
		t.Fatalf("%d writes while the second item's call runs, want 1", len(b))
	}
	mu.Lock()
	if len(acks) != 1 || acks[0] != 11 {
		t.Fatalf("acks %v, want [11]", acks)
	}
	mu.Unlock()
	slow.Result = functions.Result{Text: "b"}
	close(slow.Done)
	waitFor(t, "the second write", func() bool { b, _ := w.written(); return len(b) == 2 })
	batches, pos := w.written()
	if pos[0] != (state.Position{Commit: 10, Ord: 1 << eventBits}) || pos[1] != (state.Position{Commit: 30, Ord: 1 << eventBits}) {
		t.Fatalf("positions %v", pos)
	}
	if up := batches[1][0].(sink.Upsert); up.Value != "b" {
		t.Fatalf("second batch starts with %#v, want the upsert of b", batches[1][0])
	}
	waitFor(t, "the ack of 31", func() bool { mu.Lock(); defer mu.Unlock(); return acks[len(acks)-1] == 31 })
	if used, _ := ls.cfg.Budget.InUse(); used != 0 {
		t.Fatalf("%d budget bytes still held after every item was written", used)
	}
}

func TestLaneChunksByMaxOps(t *testing.T) {
	r := testRule(t, functions.Complete, 0)
	w := &fakeWriter{}
	var acks []replication.LSN
	var mu sync.Mutex
	ls := testLanes(t, w, 4, &acks, &mu)
	rec := ls.cfg.Tracker.Begin(time.Time{})
	l := ls.get(r.Target.Name())
	// One big transaction of ten rows: written in chunks of four items,
	// each with its position inside the transaction; the slot is confirmed
	// only once the last chunk and the commit are in.
	l.mu.Lock() // push all before the lane looks
	for i := 1; i <= 10; i++ {
		ls.cfg.Tracker.Add(rec)
		l.queue = append(l.queue, resultItem(r, i, done(functions.Result{Text: "x"}, nil), rec, state.Position{Commit: 100, Ord: int64(i) << eventBits}))
	}
	l.mu.Unlock()
	l.signal()
	waitFor(t, "three writes", func() bool { b, _ := w.written(); return len(b) == 3 })
	_, pos := w.written()
	want := []int64{4, 8, 10}
	for i, p := range pos {
		if p.Commit != 100 || p.Ord != want[i]<<eventBits {
			t.Fatalf("chunk %d ends at %v, want 100#%d", i, p, want[i]<<eventBits)
		}
	}
	mu.Lock()
	if len(acks) != 0 {
		t.Fatalf("acked %v before the transaction's commit was read", acks)
	}
	mu.Unlock()
	ls.cfg.Tracker.Seal(rec, 101)
	mu.Lock()
	defer mu.Unlock()
	if len(acks) != 1 || acks[0] != 101 {
		t.Fatalf("acks %v, want [101]", acks)
	}
}

func TestTrackerConfirmsWhatEveryLaneMadeDurable(t *testing.T) {
	var acks []replication.LSN
	tr := track.New(func(l replication.LSN) { acks = append(acks, l) })
	a, b, c := tr.Begin(time.Time{}), tr.Begin(time.Time{}), tr.Begin(time.Time{})
	tr.Add(a) // lane 1
	tr.Add(a) // lane 2
	tr.Add(b) // lane 2
	tr.Seal(a, 10)
	tr.Seal(b, 20)
	tr.Seal(c, 30) // no items: done at once, but behind a and b
	if len(acks) != 0 {
		t.Fatalf("acked %v while every transaction has an item pending", acks)
	}
	tr.Done(b, 1) // lane 2 is ahead of lane 1 ...
	if len(acks) != 0 {
		t.Fatalf("acked %v past a transaction that lane 1 has not written", acks)
	}
	tr.Done(a, 1)
	tr.Done(a, 1) // ... until lane 1 writes a
	if len(acks) != 1 || acks[0] != 30 {
		t.Fatalf("acks %v, want [30]", acks)
	}
	if lsn, _, n := tr.State(); lsn != 30 || n != 0 {
		t.Fatalf("state %s with %d pending, want 30 with 0", lsn, n)
	}
}

func TestBatchResultOps(t *testing.T) {
	complete := testRule(t, functions.Complete, 0)
	embed3 := testRule(t, functions.Embed, 3)
	tests := []struct {
		name       string
		rule       *rules.Rule
		call       *work.Call
		wantValue  any
		wantReason string
	}{
		{"text", complete, done(functions.Result{Text: "hi"}, nil), "hi", ""},
		{"null image", complete, nil, nil, ""},
		{"vector of the right dimension", embed3, done(functions.Result{Vector: []float32{1, 2, 3}}, nil), []float32{1, 2, 3}, ""},
		{"wrong dimension", embed3, done(functions.Result{Vector: []float32{1, 2}}, nil), nil, "bad_response"},
		{"function error", complete, done(functions.Result{Null: true}, &functions.Error{Reason: functions.UnknownFormat, Detail: "x", ImageBytes: 5, ImageHead: []byte("abcde")}), nil, "unknown_format"},
		{"provider error", complete, done(functions.Result{Null: true}, &functions.Error{Reason: functions.ProviderError, Detail: "HTTP 400", ImageBytes: 5}), nil, "provider_error"},
		{"the stored result's input", complete, unchanged(), nil, "-"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b batch
			b.add(&work.Item{Kind: work.Result, Rule: tc.rule.Ref(), Dest: work.Dest{Target: tc.rule.Target}, Row: work.Row{Key: []any{1}, JSON: []byte(`{"id": 1}`)}, Call: tc.call})
			ops := b.ops
			if tc.wantReason == "-" {
				if len(ops) != 0 {
					t.Fatalf("%d ops for an unchanged input, want none", len(ops))
				}
				return
			}
			if len(ops) != 3 {
				t.Fatalf("%d ops", len(ops))
			}
			// What the result was computed from: kept for a value, forgotten
			// for NULL or a failure.
			in := ops[1].(state.ResultInput)
			if stored := in.InputKey != nil; stored != (tc.wantValue != nil) {
				t.Fatalf("input key %x stored for value %v", in.InputKey, tc.wantValue)
			}
			ops = append(ops[:1:1], ops[2:]...)
			up := ops[0].(sink.Upsert)
			switch want := tc.wantValue.(type) {
			case []float32:
				got, _ := up.Value.([]float32)
				if len(got) != len(want) {
					t.Fatalf("value %v, want %v", up.Value, want)
				}
			default:
				if up.Value != tc.wantValue {
					t.Fatalf("value %#v, want %#v", up.Value, tc.wantValue)
				}
			}
			if tc.wantReason == "" {
				if _, ok := ops[1].(state.Resolve); !ok {
					t.Fatalf("want Resolve, got %#v", ops[1])
				}
				return
			}
			e, ok := ops[1].(state.Error)
			if !ok || e.Reason != tc.wantReason {
				t.Fatalf("want errors row %s, got %#v", tc.wantReason, ops[1])
			}
			if e.ImageBytes == nil {
				t.Fatal("errors row lacks the image length")
			}
		})
	}
}

// TestLaneMoveWaitsForItsResults: a Move is written only once the calls of
// its row's results (which compare the stored input at the old key) are done.
func TestLaneMoveWaitsForItsResults(t *testing.T) {
	r := testRule(t, functions.Complete, 0)
	w := &fakeWriter{}
	var acks []replication.LSN
	var mu sync.Mutex
	ls := testLanes(t, w, 100, &acks, &mu)
	rec := ls.cfg.Tracker.Begin(time.Time{})
	slow := work.NewCall(0, nil)
	move := work.Item{Kind: work.Move, Dest: work.Dest{Target: r.Target}, Row: work.Row{Key: []any{2}, JSON: []byte(`{"id": 2}`)}, Old: work.Row{Key: []any{1}, JSON: []byte(`{"id": 1}`)}, Place: work.Place{Txn: rec, Pos: state.Position{Commit: 10, Ord: 1 << eventBits}}, Waits: []*work.Call{slow}}
	l := ls.get(r.Target.Name())
	ls.cfg.Tracker.Add(rec)
	l.push(move)
	time.Sleep(30 * time.Millisecond)
	if b, _ := w.written(); len(b) != 0 {
		t.Fatalf("the Move was written before its row's call finished")
	}
	close(slow.Done)
	waitFor(t, "the Move", func() bool { b, _ := w.written(); return len(b) == 1 })
}

// refusingWriter refuses (SQLSTATE 22021) every batch holding an upsert of
// the value "bad", as PostgreSQL refuses a text with a NUL.
type refusingWriter struct{ fakeWriter }

func (w *refusingWriter) Write(ctx context.Context, ops []sink.Op, pos state.Position, ct time.Time) error {
	for _, op := range ops {
		if up, ok := op.(sink.Upsert); ok && up.Value == "bad" {
			return &pgconn.PgError{Code: "22021", Message: "invalid byte sequence for encoding \"UTF8\": 0x00"}
		}
	}
	return w.fakeWriter.Write(ctx, ops, pos, ct)
}

// TestLaneIsolatesARefusedResult: one result the target refuses costs only
// its own row (a NULL and a bad_response errors row); the others are written.
func TestLaneIsolatesARefusedResult(t *testing.T) {
	r := testRule(t, functions.Complete, 0)
	w := &refusingWriter{}
	var acks []replication.LSN
	var mu sync.Mutex
	ls := testLanes(t, nil, 100, &acks, &mu)
	ls.cfg.NewWriter = func(string) Writer { return w }
	rec := ls.cfg.Tracker.Begin(time.Time{})
	l := ls.get(r.Target.Name())
	l.mu.Lock()
	for i, v := range []string{"ok1", "bad", "ok3"} {
		ls.cfg.Tracker.Add(rec)
		l.queue = append(l.queue, resultItem(r, i+1, done(functions.Result{Text: v}, nil), rec, state.Position{Commit: 10, Ord: int64(i+1) << eventBits}))
	}
	l.mu.Unlock()
	l.signal()
	ls.cfg.Tracker.Seal(rec, 11)
	waitFor(t, "the three rows, one at a time", func() bool { b, _ := w.written(); return len(b) == 3 })
	batches, _ := w.written()
	var values []any
	var reasons []string
	for _, b := range batches {
		for _, op := range b {
			switch op := op.(type) {
			case sink.Upsert:
				values = append(values, op.Value)
			case state.Error:
				reasons = append(reasons, op.Reason)
			}
		}
	}
	if fmt.Sprint(values) != "[ok1 <nil> ok3]" || fmt.Sprint(reasons) != "[bad_response]" {
		t.Errorf("values %v, errors rows %v; want [ok1 <nil> ok3] and one bad_response", values, reasons)
	}
	waitFor(t, "the ack", func() bool { mu.Lock(); defer mu.Unlock(); return len(acks) == 1 && acks[0] == 11 })
}

// TestLaneLinger: a short ready prefix with a call in flight right behind
// it waits up to the linger for that call (fewer, bigger target
// transactions under load); with nothing in flight behind it, on a closed
// lane, or without a linger, it is taken at once.
func TestLaneLinger(t *testing.T) {
	r := testRule(t, functions.Complete, 0)
	rec := &track.Txn{}
	ok := functions.Result{Text: "x"}
	t0 := time.Unix(1700000000, 0)
	cases := []struct {
		name    string
		pending bool // a call in flight behind the two ready items
		closed  bool
		linger  time.Duration
		at      time.Duration // when take looks, from the first look
		want    int           // items taken
		hold    time.Duration
		maxOps  int // default 100
	}{
		{"in flight behind: held", true, false, 20 * time.Millisecond, 0, 0, 20 * time.Millisecond, 0},
		{"in flight behind: held for the rest", true, false, 20 * time.Millisecond, 15 * time.Millisecond, 0, 5 * time.Millisecond, 0},
		{"in flight behind: the linger is over", true, false, 20 * time.Millisecond, 20 * time.Millisecond, 2, 0, 0},
		{"nothing behind", false, false, 20 * time.Millisecond, 0, 2, 0, 0},
		{"closed", true, true, 20 * time.Millisecond, 0, 2, 0, 0},
		{"no linger", true, false, 0, 0, 2, 0, 0},
		{"a full chunk ahead of the call", true, false, 20 * time.Millisecond, 0, 1, 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := &lane{ls: &Lanes{cfg: Config{MaxOps: 100, Linger: tc.linger}}, wake: make(chan struct{}, 1), closed: tc.closed}
			if tc.maxOps > 0 {
				l.ls.cfg.MaxOps = tc.maxOps
			}
			l.queue = []work.Item{resultItem(r, 1, done(ok, nil), rec, state.Position{Commit: 1}), resultItem(r, 2, done(ok, nil), rec, state.Position{Commit: 2})}
			behind := work.NewCall(0, nil)
			if tc.pending {
				l.queue = append(l.queue, resultItem(r, 3, behind, rec, state.Position{Commit: 3}))
			}
			if tc.at > 0 { // the first look began the linger
				if items, _, _, _ := l.take(t0); len(items) != 0 {
					t.Fatalf("first look took %d items", len(items))
				}
			}
			items, wait, hold, _ := l.take(t0.Add(tc.at))
			if len(items) != tc.want || hold != tc.hold {
				t.Fatalf("took %d items, hold %s; want %d, %s", len(items), hold, tc.want, tc.hold)
			}
			if hold > 0 && wait != behind.Done {
				t.Fatal("a held prefix does not wait for the call behind it")
			}
			if hold > 0 { // the call behind ends: all three go together
				behind.Result = ok
				close(behind.Done)
				if items, _, _, _ := l.take(t0.Add(tc.at + time.Millisecond)); len(items) != 3 {
					t.Fatalf("after the call behind ended: took %d items, want 3", len(items))
				}
			}
		})
	}
}

// TestLaneLingerAgain: the linger begins again for each prefix. After a
// held prefix is written, the next short prefix with a call behind it is
// held for the whole linger again, not written at once for a linger that
// began long before.
func TestLaneLingerAgain(t *testing.T) {
	r := testRule(t, functions.Complete, 0)
	rec := &track.Txn{}
	ok := functions.Result{Text: "x"}
	t0 := time.Unix(1700000000, 0)
	l := &lane{ls: &Lanes{cfg: Config{MaxOps: 100, Linger: 20 * time.Millisecond}}, wake: make(chan struct{}, 1)}
	l.queue = []work.Item{resultItem(r, 1, done(ok, nil), rec, state.Position{Commit: 1}), resultItem(r, 2, work.NewCall(0, nil), rec, state.Position{Commit: 2})}
	if items, _, hold, _ := l.take(t0); len(items) != 0 || hold != 20*time.Millisecond {
		t.Fatalf("first prefix: took %d items, hold %s", len(items), hold)
	}
	if items, _, _, _ := l.take(t0.Add(20 * time.Millisecond)); len(items) != 1 {
		t.Fatalf("first prefix after the linger: took %d items, want 1", len(items))
	}
	// Row 2 is still in flight; row 3 is ready behind it, row 4 in flight.
	close(l.queue[0].Call.Done)
	l.queue = append(l.queue, resultItem(r, 3, done(ok, nil), rec, state.Position{Commit: 3}), resultItem(r, 4, work.NewCall(0, nil), rec, state.Position{Commit: 4}))
	at := t0.Add(time.Second)
	if items, _, hold, _ := l.take(at); len(items) != 0 || hold != 20*time.Millisecond {
		t.Fatalf("second prefix: took %d items, hold %s; want it held for the whole linger", len(items), hold)
	}
}

// TestLaneRunLingers: a running lane writes a held prefix once the linger
// has passed, though the call behind it never ends (on close: TestLaneCloseEndsLinger).
func TestLaneRunLingers(t *testing.T) {
	r := testRule(t, functions.Complete, 0)
	w := &fakeWriter{wrote: make(chan struct{}, 8)}
	var acks []replication.LSN
	var mu sync.Mutex
	ls := testLanes(t, w, 100, &acks, &mu)
	ls.cfg.Linger = 50 * time.Millisecond
	ls.cfg.Budget.Acquire(context.Background(), 3*itemCost)
	rec := ls.cfg.Tracker.Begin(time.Time{})
	ok := functions.Result{Text: "x"}
	l := ls.get(r.Target.Name())
	start := time.Now()
	never := work.NewCall(0, nil)
	l.mu.Lock() // both before the lane looks
	for i, c := range []*work.Call{done(ok, nil), never} {
		ls.cfg.Tracker.Add(rec)
		l.queue = append(l.queue, resultItem(r, i+1, c, rec, state.Position{Commit: 1, Ord: int64(i+1) << eventBits}))
	}
	l.mu.Unlock()
	l.signal()
	select {
	case <-w.wrote:
	case <-time.After(5 * time.Second):
		t.Fatal("the held prefix was never written")
	}
	if d := time.Since(start); d < 40*time.Millisecond {
		t.Errorf("the prefix was written after %s, before the linger of 50ms", d)
	}
	if batches, _ := w.written(); len(batches) != 1 {
		t.Fatalf("%d writes, want 1", len(batches))
	}
	// Item 3 comes while the call is still in flight (the lane waits on
	// it, nothing ready ahead), then the call ends: both in one write.
	ls.cfg.Tracker.Add(rec)
	l.push(resultItem(r, 3, done(ok, nil), rec, state.Position{Commit: 1, Ord: 3 << eventBits}))
	never.Result = ok
	close(never.Done)
	select {
	case <-w.wrote:
	case <-time.After(5 * time.Second):
		t.Fatal("the rest was not written after the call ended")
	}
	if _, pos := w.written(); len(pos) != 2 || pos[1].Ord != 3<<eventBits {
		t.Fatalf("writes end at %v, want the second at item 3", pos)
	}
}

// TestLaneCloseEndsLinger: a graceful stop (close) writes a held prefix at
// once, not after the linger, though the call behind it never ends.
func TestLaneCloseEndsLinger(t *testing.T) {
	r := testRule(t, functions.Complete, 0)
	w := &fakeWriter{wrote: make(chan struct{}, 8)}
	var acks []replication.LSN
	var mu sync.Mutex
	ls := testLanes(t, w, 100, &acks, &mu)
	ls.cfg.Linger = 10 * time.Second
	ls.cfg.Budget.Acquire(context.Background(), 2*itemCost)
	rec := ls.cfg.Tracker.Begin(time.Time{})
	l := ls.get(r.Target.Name())
	never := work.NewCall(0, nil)
	l.mu.Lock()
	for i, c := range []*work.Call{done(functions.Result{Text: "x"}, nil), never} {
		ls.cfg.Tracker.Add(rec)
		l.queue = append(l.queue, resultItem(r, i+1, c, rec, state.Position{Commit: 1, Ord: int64(i+1) << eventBits}))
	}
	l.mu.Unlock()
	l.signal()
	time.Sleep(50 * time.Millisecond) // the lane holds the prefix
	if batches, _ := w.written(); len(batches) != 0 {
		t.Fatalf("%d writes before the close, want the prefix held", len(batches))
	}
	start := time.Now()
	l.close()
	l.close() // twice is harmless
	select {
	case <-w.wrote:
	case <-time.After(5 * time.Second):
		t.Fatal("the held prefix was not written after the close")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("written %s after the close, want at once", d)
	}
	if batches, _ := w.written(); len(batches) != 1 {
		t.Fatalf("%d writes, want 1", len(batches))
	}
}

// TestIdleLaneGivesItsConnectionBack: a lane with nothing to write closes
// its writer's connection after Idle, once, and writes again afterwards
// (the writer connects on demand).
func TestIdleLaneGivesItsConnectionBack(t *testing.T) {
	r := testRule(t, functions.Complete, 0)
	w := &fakeWriter{}
	var acks []replication.LSN
	var mu sync.Mutex
	ls := testLanes(t, w, 100, &acks, &mu)
	ls.cfg.Idle = 30 * time.Millisecond
	tr := ls.cfg.Tracker
	ls.cfg.Budget.Acquire(context.Background(), 2*itemCost)
	push := func(id int, commit replication.LSN) {
		rec := tr.Begin(time.Time{})
		it := resultItem(r, id, done(functions.Result{Text: "x"}, nil), rec, state.Position{Commit: commit, Ord: 1 << eventBits})
		tr.Add(rec)
		ls.Push(it)
		tr.Seal(rec, commit+1)
	}
	push(1, 10)
	waitFor(t, "the first write", func() bool { b, _ := w.written(); return len(b) == 1 })
	waitFor(t, "the idle lane to close its connection", func() bool { w.mu.Lock(); defer w.mu.Unlock(); return w.closes == 1 })
	time.Sleep(100 * time.Millisecond)
	w.mu.Lock()
	closes := w.closes
	w.mu.Unlock()
	if closes != 1 {
		t.Fatalf("%d closes while idle, want 1", closes)
	}
	push(2, 20)
	waitFor(t, "a write after the idle close", func() bool { b, _ := w.written(); return len(b) == 2 })
}

// missingWriter fails every write as PostgreSQL does on a dropped table.
type missingWriter struct{ fakeWriter }

func (w *missingWriter) Write(context.Context, []sink.Op, state.Position, time.Time) error {
	return &pgconn.PgError{Code: "42P01", Message: `relation "public.t" does not exist`}
}

// TestLaneAbandonsATargetWithoutRules: a rule deleted and its target
// dropped while its results were on their way — the write fails with 42P01
// for good and no rule would make the table again. The lane gives those
// items up (budget released, the slot confirmed past them) instead of
// holding the slot, and the server's WAL, for ever.
func TestLaneAbandonsATargetWithoutRules(t *testing.T) {
	r := testRule(t, functions.Complete, 0)
	w := &missingWriter{}
	var acks []replication.LSN
	var mu sync.Mutex
	tr := track.New(func(l replication.LSN) { mu.Lock(); acks = append(acks, l); mu.Unlock() })
	sp := testSpawner(t)
	repairs := 0
	ls := New(sp, Config{Log: slog.New(slog.DiscardHandler), NewWriter: func(string) Writer { return w },
		Budget: cost.NewBudget(1 << 20), Tracker: tr, MaxOps: 100, Backoff: time.Millisecond,
		Targets: Targets{Repair: func(context.Context, string) error { repairs++; return ErrNoRules }}})
	ls.cfg.Budget.Acquire(context.Background(), 2*itemCost)
	for i, commit := range []replication.LSN{10, 20} {
		rec := tr.Begin(time.Time{})
		it := resultItem(r, i, done(functions.Result{Text: "x"}, nil), rec, state.Position{Commit: commit, Ord: 1 << eventBits})
		tr.Add(rec)
		ls.Push(it)
		tr.Seal(rec, commit+1)
	}
	waitFor(t, "the slot confirmed past the abandoned items", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acks) > 0 && acks[len(acks)-1] == 21
	})
	if used, _ := ls.cfg.Budget.InUse(); used != 0 {
		t.Fatalf("%d bytes of budget still held", used)
	}
	if repairs == 0 {
		t.Fatal("the lane never asked whether its target should be made again")
	}
	select {
	case err := <-ls.Failed():
		t.Fatalf("the lane failed: %v", err)
	default:
	}
}

// TestLaneStalled: a lane holding an item it cannot write yet reports how
// long it has held it; once written, nothing.
func TestLaneStalled(t *testing.T) {
	r := testRule(t, functions.Complete, 0)
	w := &fakeWriter{}
	var acks []replication.LSN
	var mu sync.Mutex
	ls := testLanes(t, w, 100, &acks, &mu)
	ls.cfg.Budget.Acquire(context.Background(), itemCost)
	tr := ls.cfg.Tracker
	rec := tr.Begin(time.Time{})
	slow := work.NewCall(0, nil)
	tr.Add(rec)
	ls.Push(resultItem(r, 1, slow, rec, state.Position{Commit: 10, Ord: 1 << eventBits}))
	tr.Seal(rec, 11)
	time.Sleep(50 * time.Millisecond)
	if st := ls.Status(); len(st) != 1 || st[0].Pending != 1 || st[0].Stalled < 50*time.Millisecond {
		t.Fatalf("status %+v, want one pending item held ≥ 50ms", st)
	}
	slow.Result = functions.Result{Text: "x"}
	close(slow.Done)
	waitFor(t, "the write", func() bool { b, _ := w.written(); return len(b) == 1 })
	waitFor(t, "the lane to report nothing held", func() bool { st := ls.Status(); return st[0].Pending == 0 && st[0].Stalled == 0 })
}

// TestLaneStalledOnFailingWrites: a lane whose writes keep failing (a target
// that cannot be written, with rules that still want it) reports the items
// it keeps trying as pending and stalled.
func TestLaneStalledOnFailingWrites(t *testing.T) {
	r := testRule(t, functions.Complete, 0)
	w := &missingWriter{}
	tr := track.New(func(replication.LSN) {})
	sp := testSpawner(t)
	ls := New(sp, Config{Log: slog.New(slog.DiscardHandler), NewWriter: func(string) Writer { return w },
		Budget: cost.NewBudget(1 << 20), Tracker: tr, MaxOps: 100, Backoff: time.Millisecond,
		Targets: Targets{Repair: func(context.Context, string) error { return errors.New("permission denied to create table") }}})
	ls.cfg.Budget.Acquire(context.Background(), itemCost)
	rec := tr.Begin(time.Time{})
	tr.Add(rec)
	ls.Push(resultItem(r, 1, done(functions.Result{Text: "x"}, nil), rec, state.Position{Commit: 10, Ord: 1 << eventBits}))
	tr.Seal(rec, 11)
	waitFor(t, "the failing lane to report a stall", func() bool {
		st := ls.Status()
		return len(st) == 1 && st[0].Pending == 1 && st[0].Stalled >= 50*time.Millisecond
	})
}

// TestLaneRetires: the lane of a target no rule writes any more stops once
// it has written what it holds — its goroutine ends, its connection closes,
// its checkpoint row is deleted, it leaves status — and a push before that
// keeps it; after it retired, a push starts a new lane.
func TestLaneRetires(t *testing.T) {
	r := testRule(t, functions.Complete, 0)
	w := &fakeWriter{}
	var acks []replication.LSN
	var mu sync.Mutex
	ls := testLanes(t, w, 100, &acks, &mu)
	tr := ls.cfg.Tracker
	ls.cfg.Budget.Acquire(context.Background(), 3*itemCost)
	push := func(id int, c *work.Call, commit replication.LSN) {
		rec := tr.Begin(time.Time{})
		tr.Add(rec)
		ls.Push(resultItem(r, id, c, rec, state.Position{Commit: commit, Ord: 1 << eventBits}))
		tr.Seal(rec, commit+1)
	}
	slow := work.NewCall(0, nil)
	push(1, slow, 10)
	ls.Retire(r.Target.Name())
	time.Sleep(30 * time.Millisecond)
	if st := ls.Status(); len(st) != 1 {
		t.Fatalf("a lane holding an unwritten item retired: status %+v", st)
	}
	slow.Result = functions.Result{Text: "x"}
	close(slow.Done)
	waitFor(t, "the lane to write and retire", func() bool { return len(ls.Status()) == 0 })
	w.mu.Lock()
	forgot, closes, batches := w.forgot, w.closes, len(w.batches)
	w.mu.Unlock()
	if forgot != 1 || closes < 1 || batches != 1 {
		t.Fatalf("forgot %d, closes %d, batches %d: want the item written, then the checkpoint forgotten and the connection closed", forgot, closes, batches)
	}
	push(2, done(functions.Result{Text: "y"}, nil), 20)
	waitFor(t, "a new lane's write", func() bool { b, _ := w.written(); return len(b) == 2 })
	if st := ls.Status(); len(st) != 1 {
		t.Fatalf("status %+v, want the new lane", st)
	}
}

// TestLaneDrainDoesNotWaitOnAFailingTarget: a graceful stop (Drain) of a
// lane whose target keeps failing ends at once, without a failure and
// without confirming what it held: it is read again at the next start.
func TestLaneDrainDoesNotWaitOnAFailingTarget(t *testing.T) {
	r := testRule(t, functions.Complete, 0)
	w := &missingWriter{}
	var acks []replication.LSN
	tr := track.New(func(l replication.LSN) { acks = append(acks, l) })
	sp := testSpawner(t)
	ls := New(sp, Config{Log: slog.New(slog.DiscardHandler), NewWriter: func(string) Writer { return w },
		Budget: cost.NewBudget(1 << 20), Tracker: tr, MaxOps: 100, Backoff: time.Millisecond,
		Targets: Targets{Repair: func(context.Context, string) error { return errors.New("the target server is down") }}})
	ls.cfg.Budget.Acquire(context.Background(), itemCost)
	rec := tr.Begin(time.Time{})
	tr.Add(rec)
	ls.Push(resultItem(r, 1, done(functions.Result{Text: "x"}, nil), rec, state.Position{Commit: 10, Ord: 1 << eventBits}))
	tr.Seal(rec, 11)
	waitFor(t, "a failed write", func() bool { st := ls.Status(); return len(st) == 1 && st[0].Stalled > 0 })
	drained := make(chan struct{})
	go func() { ls.Drain(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(2 * time.Second):
		t.Fatal("Drain waited on a target that keeps failing")
	}
	select {
	case err := <-ls.Failed():
		t.Fatalf("the lane failed: %v", err)
	default:
	}
	if len(acks) != 0 {
		t.Errorf("acks %v: what the lane held was confirmed without being written", acks)
	}
}

// testSpawner returns a supervisor stopped hard, and joined, at the end of
// the test.
func testSpawner(t *testing.T) *supervise.Supervisor {
	t.Helper()
	sp := supervise.New()
	t.Cleanup(func() { sp.Stop(0) })
	return sp
}
