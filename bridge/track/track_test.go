package track

import (
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/replication"
)

// TestTrackerConfirmsContiguous: the slot moves only past transactions whose
// items are all durable and that are sealed, in commit order.
func TestTrackerConfirmsContiguous(t *testing.T) {
	var acks []replication.LSN
	tr := New(func(l replication.LSN) { acks = append(acks, l) })
	a, b, c := tr.Begin(time.Unix(1, 0)), tr.Begin(time.Unix(2, 0)), tr.Begin(time.Unix(3, 0))
	tr.Add(a)
	tr.Add(b)
	tr.Add(b)
	tr.Seal(a, 10)
	tr.Seal(b, 20)
	tr.Seal(c, 30) // no items: complete once the ones before it are
	if len(acks) != 0 {
		t.Fatalf("acks before any item was done: %v", acks)
	}
	tr.Done(b, 2) // b is complete but a is not: nothing moves
	if len(acks) != 0 {
		t.Fatalf("acked past a pending transaction: %v", acks)
	}
	tr.Done(a, 1)
	if len(acks) != 1 || acks[0] != 30 {
		t.Fatalf("acks = %v, want [30]", acks)
	}
	lsn, at, open := tr.State()
	if lsn != 30 || !at.Equal(time.Unix(3, 0)) || open != 0 {
		t.Fatalf("State = %s %v %d", lsn, at, open)
	}
	select {
	case <-tr.Moved():
	default:
		t.Fatal("Moved not signalled")
	}
}

// TestTrackerAbandon: an abandoned transaction does not move the position
// itself, but is passed by the next one.
func TestTrackerAbandon(t *testing.T) {
	tr := New(nil)
	a := tr.Begin(time.Time{})
	tr.Add(a)
	tr.Abandon(a)
	tr.Done(a, 1)
	if lsn, _, _ := tr.State(); lsn != 0 {
		t.Fatalf("abandoned transaction confirmed %s", lsn)
	}
	b := tr.Begin(time.Time{})
	tr.Seal(b, 42)
	if lsn, _, _ := tr.State(); lsn != 42 {
		t.Fatalf("confirmed %s, want 0/2A", lsn)
	}
}

func TestIdle(t *testing.T) {
	var acks []replication.LSN
	tr := New(func(l replication.LSN) { acks = append(acks, l) })
	if !tr.Idle(100) {
		t.Fatal("Idle(100) with nothing pending did not move")
	}
	rec := tr.Begin(time.Time{})
	if tr.Idle(200) {
		t.Fatal("Idle(200) moved past a transaction on its way")
	}
	tr.Add(rec)
	tr.Seal(rec, 300)
	tr.Done(rec, 1)
	if tr.Idle(250) {
		t.Fatal("Idle(250) moved the position back below 300")
	}
	if !tr.Idle(400) {
		t.Fatal("Idle(400) did not move")
	}
	if got, _, _ := tr.State(); got != 400 {
		t.Fatalf("confirmed = %s, want 400", got)
	}
	want := []replication.LSN{100, 300, 400}
	if len(acks) != len(want) {
		t.Fatalf("acks = %v, want %v", acks, want)
	}
	for i := range want {
		if acks[i] != want[i] {
			t.Fatalf("acks = %v, want %v", acks, want)
		}
	}
}

// TestCoalesce: behind a transaction whose item is pending, transactions
// without items take one record between them, and confirming past them
// still lands on the last one's end.
func TestCoalesce(t *testing.T) {
	var acks []replication.LSN
	tr := New(func(l replication.LSN) { acks = append(acks, l) })
	held := tr.Begin(time.Time{})
	tr.Add(held)
	tr.Seal(held, 100)
	for i := 1; i <= 1000; i++ {
		rec := tr.Begin(time.Time{})
		tr.Seal(rec, replication.LSN(100+i))
	}
	mid := tr.Begin(time.Time{}) // an item of its own: not folded
	tr.Add(mid)
	tr.Seal(mid, 2000)
	last := tr.Begin(time.Time{})
	tr.Seal(last, 2001)
	if _, _, n := tr.State(); n != 4 {
		t.Fatalf("%d records, want 4: held, the 1000 empty ones folded, mid, last", n)
	}
	tr.Done(held, 1)
	if got, _, _ := tr.State(); got != 1100 {
		t.Errorf("confirmed %s after the held one, want 1100 (the last empty one's end)", got)
	}
	tr.Done(mid, 1)
	if got, _, n := tr.State(); got != 2001 || n != 0 {
		t.Errorf("confirmed %s with %d records, want 2001 and none", got, n)
	}
}

// TestFoldOnDone: behind a held transaction, transactions whose items all
// became durable take no record of their own, whatever order their lanes
// finish in; an abandoned one confirms nothing; confirming lands where it
// would without the folding.
func TestFoldOnDone(t *testing.T) {
	tr := New(nil)
	held := tr.Begin(time.Time{})
	tr.Add(held)
	tr.Seal(held, 10)
	var recs []*Txn
	for i := 1; i <= 1000; i++ {
		rec := tr.Begin(time.Unix(int64(i), 0))
		tr.Add(rec)
		tr.Add(rec)
		tr.Seal(rec, replication.LSN(10+i))
		recs = append(recs, rec)
	}
	cut := tr.Begin(time.Time{}) // a reconnect cut it off
	tr.Add(cut)
	tr.Abandon(cut)
	for i := len(recs) - 1; i >= 0; i-- { // the second lane finishes first, backwards
		tr.Done(recs[i], 1)
	}
	if _, _, n := tr.State(); n != 1002 {
		t.Fatalf("%d records with an item pending each, want 1002", n)
	}
	for _, rec := range recs {
		tr.Done(rec, 1)
	}
	tr.Done(cut, 1)
	if _, _, n := tr.State(); n > 3 {
		t.Errorf("%d records behind the held one once the others completed, want at most 3", n)
	}
	tr.Done(held, 1)
	got, at, n := tr.State()
	if got != 1010 || n != 0 || at != time.Unix(1000, 0) {
		t.Errorf("confirmed %s at %v with %d records, want 1010 at the last one's commit time and none", got, at, n)
	}
}
