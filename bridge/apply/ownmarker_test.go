package apply

import (
	"testing"

	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

// TestBatchQueuesOwnWritesMarker: a batch that writes a source table
// (write-back) starts with the OwnWrites marker, carrying the lane's note, so
// that the bridge skips its own transaction when the WAL shows it again; a
// batch that writes only target tables carries none. Without the marker a
// write-back result would be read back as a new change and processed again.
func TestBatchQueuesOwnWritesMarker(t *testing.T) {
	table := &catalog.Table{Schema: "public", Name: "t", Regclass: "public.t",
		Columns: []catalog.Column{{Name: "id", Type: "integer"}, {Name: "img", Type: "bytea"}, {Name: "c", Type: "text"}}}
	target := func(writeBack bool) *sink.Target {
		tg, err := sink.NewTarget(table, []string{"id"}, "c", sink.TextResult, "text", writeBack)
		if err != nil {
			t.Fatal(err)
		}
		return tg
	}
	result := func(tg *sink.Target, id int, err error) work.Item {
		r := testRule(t, functions.Complete, 0)
		r.Target = tg
		res := functions.Result{Text: "x"}
		if err != nil {
			res = functions.Result{Null: true}
		}
		return work.Item{Kind: work.Result, Rule: r.Ref(), Dest: work.Dest{Target: tg}, Row: work.Row{Key: []any{id}, JSON: []byte(`{"id": 1}`)}, Call: done(res, err)}
	}
	fail := &functions.Error{Reason: functions.ProviderError, Detail: "HTTP 400", ImageBytes: 5}
	back, sep := target(true), target(false)
	tests := []struct {
		name   string
		items  []work.Item
		marker bool
	}{
		{"write-back result", []work.Item{result(back, 1, nil)}, true},
		{"write-back failure (NULL written back)", []work.Item{result(back, 1, fail)}, true},
		{"separate target", []work.Item{result(sep, 1, nil), result(sep, 2, nil)}, false},
		{"write-back after a separate target", []work.Item{result(sep, 1, nil), result(back, 2, nil)}, true},
		{"delete only", []work.Item{{Kind: work.Delete, Rule: testRule(t, functions.Complete, 0).Ref(), Dest: work.Dest{Target: back}, Row: work.Row{Key: []any{1}, JSON: []byte(`{"id": 1}`)}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var noted []uint64
			note := func(xid uint64) { noted = append(noted, xid) }
			var b batch
			for i := range tt.items {
				b.add(&tt.items[i])
			}
			ops := b.final(note)
			n := 0
			for i, op := range ops {
				m, ok := op.(state.OwnWrites)
				if !ok {
					continue
				}
				n++
				if i != 0 {
					t.Errorf("OwnWrites at op %d of %d, want first", i, len(ops))
				}
				if m.Note == nil {
					t.Fatal("OwnWrites without the lane's note")
				}
				m.Note(42)
			}
			want := 0
			if tt.marker {
				want = 1
			}
			if n != want {
				t.Fatalf("%d OwnWrites markers in %s, want %d", n, describeOps(ops), want)
			}
			if tt.marker && (len(noted) != 1 || noted[0] != 42) {
				t.Fatalf("note received %v, want [42]", noted)
			}
		})
	}
}
