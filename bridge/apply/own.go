package apply

import (
	"sync"
	"time"
)

// Own holds the IDs of the bridge's own write-back transactions that
// the stream has not shown yet. Lanes add them (before the commit), the
// engine takes them at their Begin. It is safe for concurrent use.
type Own struct {
	mu sync.Mutex
	m  map[uint32]time.Time
}

// ownForget is how long an ID is kept when its transaction never shows up
// (it rolled back): long enough for any backlog of the stream.
const ownForget = 24 * time.Hour

// NewOwn returns the IDs xids, stored by earlier runs (state.OwnXacts).
func NewOwn(xids []uint32) *Own {
	o := &Own{m: map[uint32]time.Time{}}
	for _, x := range xids {
		o.m[x] = time.Now()
	}
	return o
}

// Add records the ID of an own transaction.
func (o *Own) Add(xid uint32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	if len(o.m) >= 4096 {
		for x, at := range o.m {
			if now.Sub(at) > ownForget {
				delete(o.m, x)
			}
		}
	}
	o.m[xid] = now
}

// Take reports whether xid is an own transaction, and forgets it.
func (o *Own) Take(xid uint32) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.m[xid]
	delete(o.m, xid)
	return ok
}
