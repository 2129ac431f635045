package apply

import (
	"sync"
	"time"
)

// Own holds the full 64-bit IDs (xid8: epoch and XID, txid_current()) of the
// bridge's own write-back transactions that the stream has not shown yet.
// Lanes add them (before the commit), the engine takes them at their Begin.
// It is safe for concurrent use.
//
// pgoutput's Begin carries the 32-bit XID only. Own widens it to 64 bits
// against the XID of the transaction the stream showed before (at start,
// the server's next XID): the transactions a slot streams one after another
// were all alive within 2^31 XIDs of each other — PostgreSQL's wraparound
// protection sees to that — so the nearest full ID with those low 32 bits
// is the one. An unrelated transaction whose XID repeats an own one's 32
// bits, 2^32 transactions later, is then never taken for the bridge's own.
type Own struct {
	mu     sync.Mutex
	m      map[uint64]time.Time // full ID → when added
	last   uint64               // the full ID of the stream's last Begin
	pruned time.Time
}

// ownForget is how long an ID is kept when its transaction never shows up
// (it rolled back): long enough for any backlog of the stream. An ID 2^31
// transactions behind the stream can never show up again and goes sooner.
const ownForget = 24 * time.Hour

// NewOwn returns the IDs xids stored by earlier runs (state.OwnXacts), with
// next the source's next transaction ID (state.NextXID), where the stream's
// IDs are widened from until its first Begin.
func NewOwn(xids []uint64, next uint64) *Own {
	now := time.Now()
	o := &Own{m: map[uint64]time.Time{}, last: next, pruned: now}
	for _, x := range xids {
		o.m[x] = now
	}
	return o
}

// Add records the full ID of an own transaction.
func (o *Own) Add(xid uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.m[xid] = time.Now()
}

// Take reports whether the transaction whose Begin carries the 32-bit xid is
// an own transaction, and forgets it. It is called for every Begin, in
// stream order.
func (o *Own) Take(xid uint32) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	full := widen(o.last, xid)
	o.last = full
	if now := time.Now(); now.Sub(o.pruned) >= time.Minute {
		o.prune(now)
	}
	_, ok := o.m[full]
	delete(o.m, full)
	return ok
}

// prune forgets IDs older than ownForget, and IDs 2^31 or more behind the
// stream, which no Begin can carry any more.
func (o *Own) prune(now time.Time) {
	o.pruned = now
	for x, at := range o.m {
		if now.Sub(at) > ownForget || x+1<<31 <= o.last {
			delete(o.m, x)
		}
	}
}

// Len is how many IDs are held.
func (o *Own) Len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.m)
}

// widen returns the 64-bit transaction ID whose low 32 bits are xid and
// which is nearest to ref.
func widen(ref uint64, xid uint32) uint64 {
	full := ref&^0xffffffff | uint64(xid)
	switch {
	case full > ref && full-ref > 1<<31 && full >= 1<<32:
		return full - 1<<32
	case full < ref && ref-full > 1<<31:
		return full + 1<<32
	}
	return full
}
