// Package track confirms the replication slot at what every lane has made
// durable: the end of the last source transaction before the first one with
// an item still pending. It is pgimageai's form of a capped checkpoint:
// lanes write at their own pace, the slot moves only past what all of them
// hold.
//
// It sits between the engine (which begins, counts and seals transactions)
// and the lanes (which mark items durable); it calls nothing but the ack
// function it is given, which confirms the slot to replication.
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
}

// CommitTime is the source commit time of t. It never changes.
func (t *Txn) CommitTime() time.Time { return t.commitTime }

// Tracker confirms the slot at what every lane has made durable. It is safe
// for concurrent use: the engine adds and seals, lanes mark done.
type Tracker struct {
	mu        sync.Mutex
	txns      []*Txn // in commit order, from the oldest not yet confirmed
	ack       func(replication.LSN)
	confirmed replication.LSN
	at        time.Time     // source commit time at confirmed
	moved     chan struct{} // signalled when confirmed moves
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
	rec := &Txn{commitTime: commitTime}
	t.txns = append(t.txns, rec)
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
	t.coalesce(rec)
	lsn := t.advance()
	t.mu.Unlock()
	t.confirm(lsn)
}

// Done records that items of rec are durable in their lane.
func (t *Tracker) Done(rec *Txn, items int) {
	t.mu.Lock()
	rec.pending -= items
	lsn := t.advance()
	t.mu.Unlock()
	t.confirm(lsn)
}

// coalesce folds rec, just sealed, into the record before it when neither
// holds a pending item: behind a lane that cannot write, the stream's
// transactions without items for it (most of them, often) then take one
// record, not one each. rec must be the newest record; t.mu is held.
func (t *Tracker) coalesce(rec *Txn) {
	n := len(t.txns)
	if n < 2 || t.txns[n-1] != rec || rec.pending != 0 {
		return
	}
	prev := t.txns[n-2]
	if !prev.sealed || prev.pending != 0 {
		return
	}
	if rec.end > prev.end {
		prev.end, prev.commitTime = rec.end, rec.commitTime
	}
	t.txns[n-1] = nil
	t.txns = t.txns[:n-1]
}

// advance drops the transactions that are complete at the front and returns
// the new confirmed LSN, or 0 when it did not move. t.mu is held.
func (t *Tracker) advance() replication.LSN {
	var lsn replication.LSN
	n := 0
	for _, rec := range t.txns {
		if !rec.sealed || rec.pending > 0 {
			break
		}
		n++
		if rec.end > t.confirmed {
			lsn, t.confirmed, t.at = rec.end, rec.end, rec.commitTime
		}
	}
	if n > 0 {
		clear(t.txns[:n])
		t.txns = t.txns[n:]
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
	moved := len(t.txns) == 0 && lsn > t.confirmed
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

// State returns the confirmed LSN, its source commit time, and the
// transactions read but not yet confirmed.
func (t *Tracker) State() (replication.LSN, time.Time, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.confirmed, t.at, len(t.txns)
}
