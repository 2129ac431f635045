package bridge

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/sink"
)

// fakeWriter records batches; fail makes the first writes fail.
type fakeWriter struct {
	batches [][]sink.Op
	ends    []replication.LSN
	fail    int
}

func (w *fakeWriter) Write(_ context.Context, ops []sink.Op, end replication.LSN) error {
	if w.fail > 0 {
		w.fail--
		return errors.New("target refuses writes")
	}
	w.batches = append(w.batches, append([]sink.Op(nil), ops...))
	w.ends = append(w.ends, end)
	return nil
}

func done(r functions.Result, err error) *call {
	c := &call{done: make(chan struct{}), result: r, err: err, size: 3, head: []byte{1, 2, 3}}
	close(c.done)
	return c
}

func testRule(t *testing.T, fn functions.Name, dim int) *Rule {
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
	return &Rule{Name: "r", Fn: f, Model: "m", Target: &sink.Target{Table: table, Column: "c", Dim: dim}}
}

func TestApplierOrderAndBatching(t *testing.T) {
	r := testRule(t, functions.Complete, 0)
	w := &fakeWriter{fail: 1}
	var acks []replication.LSN
	a := &applier{log: slog.New(slog.DiscardHandler), w: w, ack: func(l replication.LSN) { acks = append(acks, l) }, maxOps: 100, backoff: time.Millisecond}
	in := make(chan *txn, 10)
	slow := &call{done: make(chan struct{})}
	in <- &txn{commit: replication.Commit{EndLSN: 10}, items: []item{{kind: itemResult, rule: r, target: r.Target, key: []any{1}, keyJSON: []byte(`{"id": 1}`), call: done(functions.Result{Text: "a"}, nil)}}}
	in <- &txn{commit: replication.Commit{EndLSN: 20}, items: []item{{kind: itemResult, rule: r, target: r.Target, key: []any{2}, keyJSON: []byte(`{"id": 2}`), call: slow}}}
	in <- &txn{commit: replication.Commit{EndLSN: 30}} // empty: acked without a write of its own
	close(in)
	go func() { time.Sleep(20 * time.Millisecond); slow.result = functions.Result{Text: "b"}; close(slow.done) }()
	if err := a.run(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	// Tx 10 is flushed alone because tx 20 was not ready; 20 and 30 together.
	if len(w.ends) != 2 || w.ends[0] != 10 || w.ends[1] != 30 {
		t.Fatalf("batches end at %v, want [10 30]", w.ends)
	}
	if len(acks) == 0 || acks[len(acks)-1] != 30 {
		t.Fatalf("acks %v", acks)
	}
	for i := 1; i < len(acks); i++ {
		if acks[i] < acks[i-1] {
			t.Fatalf("acks go backwards: %v", acks)
		}
	}
	up, ok := w.batches[1][0].(sink.Upsert)
	if !ok || up.Value != "b" {
		t.Fatalf("second batch starts with %#v", w.batches[1][0])
	}
	if _, ok := w.batches[1][1].(sink.Resolve); !ok {
		t.Fatalf("a success must resolve open errors, got %#v", w.batches[1][1])
	}
}

func TestApplierResultOps(t *testing.T) {
	complete := testRule(t, functions.Complete, 0)
	embed3 := testRule(t, functions.Embed, 3)
	tests := []struct {
		name       string
		rule       *Rule
		call       *call
		wantValue  any
		wantReason string
	}{
		{"text", complete, done(functions.Result{Text: "hi"}, nil), "hi", ""},
		{"null image", complete, nil, nil, ""},
		{"vector of the right dimension", embed3, done(functions.Result{Vector: []float32{1, 2, 3}}, nil), []float32{1, 2, 3}, ""},
		{"wrong dimension", embed3, done(functions.Result{Vector: []float32{1, 2}}, nil), nil, "bad_response"},
		{"function error", complete, done(functions.Result{Null: true}, &functions.Error{Reason: functions.UnknownFormat, Detail: "x", ImageBytes: 5, ImageHead: []byte("abcde")}), nil, "unknown_format"},
		{"provider error", complete, done(functions.Result{Null: true}, &functions.Error{Reason: functions.ProviderError, Detail: "HTTP 400", ImageBytes: 5}), nil, "provider_error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &applier{}
			ops := a.result(nil, item{kind: itemResult, rule: tc.rule, target: tc.rule.Target, key: []any{1}, keyJSON: []byte(`{"id": 1}`), call: tc.call})
			if len(ops) != 2 {
				t.Fatalf("%d ops", len(ops))
			}
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
				if _, ok := ops[1].(sink.Resolve); !ok {
					t.Fatalf("want Resolve, got %#v", ops[1])
				}
				return
			}
			e, ok := ops[1].(sink.Error)
			if !ok || e.Reason != tc.wantReason {
				t.Fatalf("want errors row %s, got %#v", tc.wantReason, ops[1])
			}
			if e.ImageBytes == nil {
				t.Fatal("errors row lacks the image length")
			}
		})
	}
}
