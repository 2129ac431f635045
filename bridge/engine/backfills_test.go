package engine

import (
	"testing"

	"github.com/pgimageai/pgimageai/bridge/calls"
)

// TestBackfillsClock: a backfill leaves to the stream only the rows the
// stream changed after the backfill started, drops its pages only after a
// truncate since then, and nothing is kept of a table once no backfill of
// it runs — however the backfills ended.
func TestBackfillsClock(t *testing.T) {
	bf := newBackfills(&base{}, nil, calls.Cost{})
	b := &bf.since
	k1, k2 := []byte(`{"id": 1}`), []byte(`{"id": 2}`)
	b.touch(7, k1) // no backfill of table 7 yet: nothing kept
	if len(b.seen) != 0 {
		t.Fatalf("seen %v with no backfill running", b.seen)
	}
	b.begin("a", 7)
	b.touch(7, k1)
	b.begin("b", 7)
	b.touch(7, k2)
	tests := []struct {
		name string
		got  bool
		want bool
	}{
		{"a: row 1 streamed after its start", b.streamedSince("a", k1), true},
		{"b: row 1 streamed before its start", b.streamedSince("b", k1), false},
		{"b: row 2 streamed after its start", b.streamedSince("b", k2), true},
		{"a: not truncated", b.truncatedSince("a"), false},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: %t, want %t", tt.name, tt.got, tt.want)
		}
	}
	b.truncate(7)
	b.begin("c", 7)
	if !b.truncatedSince("a") || !b.truncatedSince("b") || b.truncatedSince("c") {
		t.Errorf("truncated since: a %t, b %t, c %t; want true, true, false", b.truncatedSince("a"), b.truncatedSince("b"), b.truncatedSince("c"))
	}
	b.end("a") // stopped, not done
	b.end("b")
	if b.seen[7] == nil {
		t.Fatal("the keys of table 7 were dropped while c still backfills it")
	}
	b.end("c")
	if len(b.seen) != 0 || len(b.truncated) != 0 || len(b.started) != 0 || len(b.tables) != 0 {
		t.Errorf("kept after every backfill ended: seen %d, truncated %d, started %d, tables %d", len(b.seen), len(b.truncated), len(b.started), len(b.tables))
	}
	b.begin("d", 7)
	if b.truncatedSince("d") || b.streamedSince("d", k1) {
		t.Error("a new backfill inherits an old truncate or streamed key")
	}
}

// TestStopBackfillForgets: a backfill stopped before its end (its rule
// changed or deleted) leaves neither its progress nor its table's keys.
func TestStopBackfillForgets(t *testing.T) {
	e := &Engine{bf: newBackfills(&base{}, nil, calls.Cost{})}
	e.bf.since.begin("a", 7)
	e.bf.since.touch(7, []byte(`{"id": 1}`))
	e.bf.rows["a"] = &progress{rows: 10}
	e.bf.stop("a")
	if len(e.bf.rows) != 0 || len(e.bf.since.seen) != 0 || len(e.bf.since.started) != 0 {
		t.Errorf("kept after the stop: rows %d, seen %d, started %d", len(e.bf.rows), len(e.bf.since.seen), len(e.bf.since.started))
	}
}
