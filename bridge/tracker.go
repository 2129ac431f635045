package bridge

import (
	"sync"
	"time"

	"github.com/pgimageai/pgimageai/replication"
)

// txnRecord is a source transaction on its way through the lanes: its items
// may sit in several lanes, each writing at its own pace.
type txnRecord struct {
	end        replication.LSN // Commit.EndLSN; 0 until sealed
	commitTime time.Time
	sealed     bool // its Commit was read: no more items will be added
	pending    int  // items routed to lanes and not yet durable
}

// tracker confirms the slot at what every lane has made durable: the end of
// the last transaction before the first one with an item still pending. It
// is safe for concurrent use: the engine adds and seals, lanes mark done.
type tracker struct {
	mu        sync.Mutex
	txns      []*txnRecord // in commit order, from the oldest not yet confirmed
	ack       func(replication.LSN)
	confirmed replication.LSN
	at        time.Time     // source commit time at confirmed
	moved     chan struct{} // signalled when confirmed moves
}

func newTracker(ack func(replication.LSN)) *tracker {
	return &tracker{ack: ack, moved: make(chan struct{}, 1)}
}

// begin records a new transaction, after every earlier one.
func (t *tracker) begin(commitTime time.Time) *txnRecord {
	t.mu.Lock()
	defer t.mu.Unlock()
	rec := &txnRecord{commitTime: commitTime}
	t.txns = append(t.txns, rec)
	return rec
}

// add counts an item of rec routed to a lane.
func (t *tracker) add(rec *txnRecord) {
	t.mu.Lock()
	rec.pending++
	t.mu.Unlock()
}

// seal records the end of rec: every item it has is routed.
func (t *tracker) seal(rec *txnRecord, end replication.LSN) {
	t.mu.Lock()
	rec.end, rec.sealed = end, true
	lsn := t.advance()
	t.mu.Unlock()
	t.confirm(lsn)
}

// done records that items of rec are durable in their lane.
func (t *tracker) done(rec *txnRecord, items int) {
	t.mu.Lock()
	rec.pending -= items
	lsn := t.advance()
	t.mu.Unlock()
	t.confirm(lsn)
}

// advance drops the transactions that are complete at the front and returns
// the new confirmed LSN, or 0 when it did not move. t.mu is held.
func (t *tracker) advance() replication.LSN {
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

func (t *tracker) confirm(lsn replication.LSN) {
	if lsn == 0 {
		return
	}
	if t.ack != nil {
		t.ack(lsn)
	}
	select {
	case t.moved <- struct{}{}:
	default:
	}
}

// abandon seals rec without an end: a transaction whose reading was cut
// off and that the server did not send again. Its routed items are still
// written, but confirming stops before it... until a later transaction
// confirms past it.
func (t *tracker) abandon(rec *txnRecord) {
	t.seal(rec, 0)
}

// state returns the confirmed LSN, its source commit time, and the
// transactions read but not yet confirmed.
func (t *tracker) state() (replication.LSN, time.Time, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.confirmed, t.at, len(t.txns)
}
