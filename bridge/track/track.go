// Package track confirms the replication slot at what every lane has made
// durable: the end of the last source transaction before the first one with
// an item still pending. It is pgimageai's form of a capped checkpoint:
// lanes write at their own pace, the slot moves only past what all of them
// hold.
//
// It sits between the engine (which begins, counts and seals transactions)
// and the lanes (which mark items durable); it calls nothing but the ack
// function it is given (the bridge gives none: its checkpointer reads the
// position, stores it, and only then confirms it to the slot). Complete
// records are folded as they complete, so it holds few more records than
// there are transactions with items pending.
//
// Layer: parts.
package track

import (
	"sync"
	"time"

	"github.com/pgimageai/pgimageai/replication"
)

// Txn is a source transaction on its way through the lanes: its items may
// sit in several lanes, each writing at its own pace. Its fields are the
// Tracker's, guarded by its lock.
type Txn struct {
	end        replication.LSN // Commit.EndLSN; 0 until sealed
	commitTime time.Time
	sealed     bool // its Commit was read: no more items will be added
	pending    int  // items routed to lanes and not yet durable
	prev, next *Txn // in the Tracker's list, in commit order
}

// complete reports whether nothing more will happen to t: sealed, nothing
// pending. A complete record is never touched by the engine or a lane
// again, so the Tracker may drop it from its list.
func (t *Txn) complete() bool { return t.sealed && t.pending == 0 }

// CommitTime is the source commit time of t. It never changes.
func (t *Txn) CommitTime() time.Time { return t.commitTime }

// Tracker confirms the slot at what every lane has made durable. It is safe
// for concurrent use: the engine adds and seals, lanes mark done.
type Tracker struct {
	mu sync.Mutex
	// head and tail of the records read and not yet confirmed, in commit
	// order; n counts them. Complete records behind a held one are folded
	// into their successor (see fold), so that the list holds few records
	// more than there are transactions with items pending.
	head, tail *Txn
	n          int
	ack        func(replication.LSN)
	confirmed  replication.LSN
	// durable is confirmed as transactions made it, without the idle WAL
	// ends of Idle on top.
	durable replication.LSN
	at      time.Time     // source commit time at confirmed
	moved   chan struct{} // signalled when confirmed moves
}

// New returns a Tracker that calls ack (when not nil) each time the
// confirmed position moves.
func New(ack func(replication.LSN)) *Tracker {
	return &Tracker{ack: ack, moved: make(chan struct{}, 1)}
}

// Begin records a new transaction, after every earlier one.
func (t *Tracker) Begin(commitTime time.Time) *Txn {
	t.mu.Lock()
	defer t.mu.Unlock()
	rec := &Txn{commitTime: commitTime, prev: t.tail}
	if t.tail != nil {
		t.tail.next = rec
	} else {
		t.head = rec
	}
	t.tail = rec
	t.n++
	return rec
}

// Add counts an item of rec routed to a lane.
func (t *Tracker) Add(rec *Txn) {
	t.mu.Lock()
	rec.pending++
	t.mu.Unlock()
}

// Seal records the end of rec: every item it has is routed.
func (t *Tracker) Seal(rec *Txn, end replication.LSN) {
	t.mu.Lock()
	rec.end, rec.sealed = end, true
	t.fold(rec)
	lsn := t.advance()
	t.mu.Unlock()
	t.confirm(lsn)
}

// Done records that items of rec are durable in their lane.
func (t *Tracker) Done(rec *Txn, items int) {
	t.mu.Lock()
	rec.pending -= items
	t.fold(rec)
	lsn := t.advance()
	t.mu.Unlock()
	t.confirm(lsn)
}

// fold drops a complete record next to rec, now complete too, from the
// list: behind a lane that holds the slot, every transaction that completed
// meanwhile (most of them, often) then takes no record of its own. Of two
// neighbours the later stays, so that confirming past it lands on its end;
// an abandoned record (end 0) is dropped instead. Records are never
// changed, only unlinked: lanes read a record's commit time without the
// lock. t.mu is held.
func (t *Tracker) fold(rec *Txn) {
	if !rec.complete() || rec == t.head { // the head goes with advance
		return
	}
	if rec.end == 0 { // abandoned: nothing to confirm at it
		t.unlink(rec)
		return
	}
	if p := rec.prev; p != nil && p != t.head && p.complete() && p.end <= rec.end {
		t.unlink(p)
	}
	if nx := rec.next; nx != nil && nx.complete() && nx.end >= rec.end {
		t.unlink(rec)
	}
}

func (t *Tracker) unlink(rec *Txn) {
	if rec.prev != nil {
		rec.prev.next = rec.next
	} else {
		t.head = rec.next
	}
	if rec.next != nil {
		rec.next.prev = rec.prev
	} else {
		t.tail = rec.prev
	}
	rec.prev, rec.next = nil, nil
	t.n--
}

// advance drops the transactions that are complete at the front and returns
// the new confirmed LSN, or 0 when it did not move. t.mu is held.
func (t *Tracker) advance() replication.LSN {
	var lsn replication.LSN
	for t.head != nil && t.head.complete() {
		rec := t.head
		if rec.end > t.confirmed {
			lsn, t.confirmed, t.at = rec.end, rec.end, rec.commitTime
		}
		t.durable = max(t.durable, rec.end)
		t.unlink(rec)
	}
	return lsn
}

func (t *Tracker) confirm(lsn replication.LSN) {
	if lsn == 0 {
		return
	}
	if t.ack != nil {
		t.ack(lsn)
	}
	t.Poke()
}

// Idle moves the confirmed position up to lsn, a WAL end at which the
// stream was idle (every transaction it emitted acked, none open), when no
// transaction is on its way: nothing committed below lsn is pending then.
// It reports whether the position moved.
func (t *Tracker) Idle(lsn replication.LSN) bool {
	t.mu.Lock()
	moved := t.n == 0 && lsn > t.confirmed
	if moved {
		t.confirmed = lsn
	}
	t.mu.Unlock()
	if moved {
		t.confirm(lsn)
	}
	return moved
}

// Moved is signalled (capacity one) when the confirmed position moves.
func (t *Tracker) Moved() <-chan struct{} { return t.moved }

// Poke signals Moved without a move, so that a waiter looks again (a store
// that failed is retried).
func (t *Tracker) Poke() {
	select {
	case t.moved <- struct{}{}:
	default:
	}
}

// Abandon seals rec without an end: a transaction whose reading was cut
// off and that the server did not send again. Its routed items are still
// written, but confirming stops before it... until a later transaction
// confirms past it.
func (t *Tracker) Abandon(rec *Txn) {
	t.Seal(rec, 0)
}

// Durable returns the confirmed position as transactions made it, idle
// WAL ends aside: what is above it in State's is WAL without changes for
// the lanes, which the checkpointer may store later.
func (t *Tracker) Durable() replication.LSN {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.durable
}

// State returns the confirmed LSN, its source commit time, and the
// transactions read but not yet confirmed.
func (t *Tracker) State() (replication.LSN, time.Time, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.confirmed, t.at, t.n
}
