package bridge

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/state"
)

// Never pay twice for the same image (issue 15): pgimageai.results keeps, per
// rule and row, what the stored result was computed from; a change whose
// input is the same makes no call and writes nothing. The stored input is
// only trusted when no earlier change of the same row is still waiting in its
// lane (rowCounts): otherwise that change, written later, would replace the
// result the comparison relied on. Such a change is compared with that
// earlier change instead: when the last item routed for the row and rule is
// a result of the same input, with nothing after it that moves, deletes or
// truncates the row, the new change follows its call (pending) — without
// this, a row changed twice while its lane is busy paid again after every
// restart (the cache is empty then; TestChaosNeverPayTwice).

// rowCounts counts, per lane and row, the items routed and not yet written;
// a truncate counts for every row of its lane. It is safe for concurrent use:
// the engine adds, lanes remove.
type rowCounts struct {
	mu sync.Mutex
	n  map[string]int
	// last holds, per lane and row, the call of the last result item routed
	// for the row, by rule, while it waits and nothing routed after it
	// moved, deleted or truncated the row.
	last map[string]map[string]*call
}

// allRows stands for every row of a lane (a truncate).
const allRows = "*"

func rowKey(lane string, key []byte) string { return lane + "\x00" + string(key) }

// route counts the rows item it touches in lane, and remembers the call of
// a result (see pending).
func (c *rowCounts) route(lane string, it *item) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n, c.last = map[string]int{}, map[string]map[string]*call{}
	}
	keys := rowsOf(it)
	for _, k := range keys {
		c.n[rowKey(lane, k)]++
	}
	if it.kind != itemResult || it.rule == nil {
		for _, k := range keys {
			delete(c.last, rowKey(lane, k))
		}
		return
	}
	rk := rowKey(lane, it.keyJSON)
	if it.call == nil || it.call.key == nil { // a NULL result, or no provider asked
		delete(c.last[rk], it.rule.Name)
		return
	}
	if c.last[rk] == nil {
		c.last[rk] = map[string]*call{}
	}
	c.last[rk][it.rule.Name] = it.call
}

func (c *rowCounts) done(lane string, keys ...[]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		return
	}
	for _, k := range keys {
		rk := rowKey(lane, k)
		if c.n[rk]--; c.n[rk] <= 0 {
			delete(c.n, rk)
			delete(c.last, rk)
		}
	}
}

// busy reports whether the row keyed key of lane has an item waiting.
func (c *rowCounts) busy(lane string, key []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[rowKey(lane, key)] > 0 || c.n[rowKey(lane, []byte(allRows))] > 0
}

// at returns where the stored input of the row keyed keyJSON (key as
// values) of lane is compared, noting whether an earlier change of the row
// waits in the lane.
func (c *rowCounts) at(lane string, keyJSON []byte, key []any) *lookup {
	return &lookup{lane: lane, keyJSON: keyJSON, key: key, busy: c.busy(lane, keyJSON)}
}

// pending returns the call that a change of input k for rule at a busy row
// (at.busy) follows: that of the last result routed for the row and rule,
// when it had the same input and nothing after it moved, deleted or
// truncated the row; nil otherwise. Whatever that item leaves in the target
// — a result computed from k, or the stored one of the same input — is what
// the change would leave.
func (c *rowCounts) pending(at *lookup, rule string, k cacheKey) *call {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[rowKey(at.lane, []byte(allRows))] > 0 {
		return nil
	}
	p := c.last[rowKey(at.lane, at.keyJSON)][rule]
	if p == nil || p.key == nil || *p.key != k {
		return nil
	}
	return p
}

// follow waits for p, the call that c follows (rowCounts.pending), and takes
// its outcome when it succeeded: c reports false when p failed, and c is
// then to be made as any other call.
func (c *call) follow(p *call) bool {
	<-p.done
	if p.err != nil {
		return false
	}
	c.result, c.unchanged, c.hit = p.result, p.unchanged, true
	return true
}

// rowsOf returns the rows an item touches, for rowCounts: its key (and old
// key), or every row for a truncate; none for bookkeeping items.
func rowsOf(it *item) [][]byte {
	switch it.kind {
	case itemResult, itemDelete:
		return [][]byte{it.keyJSON}
	case itemMove:
		return [][]byte{it.keyJSON, it.oldKeyJSON}
	case itemTruncate:
		return [][]byte{[]byte(allRows)}
	}
	return nil
}

// lookups is a small pool of target connections on which call goroutines
// read the stored inputs. It is safe for concurrent use.
type lookups struct {
	mu     sync.Mutex
	closed bool // after close, connections are closed, not kept
	dsn    string
	sem    chan struct{}  // a slot per connection in use
	idle   chan *pgx.Conn // connections not in use
}

func newLookups(dsn string, n int) *lookups {
	return &lookups{dsn: dsn, sem: make(chan struct{}, n), idle: make(chan *pgx.Conn, n)}
}

// lookup is where a stored input is compared: a row's key, as source_key
// JSON and as values.
type lookup struct {
	lane    string
	keyJSON []byte
	key     []any
	// busy: an earlier change of the row waits in the lane; the stored
	// input is not compared, the change may follow that one's call instead
	// (rowCounts.pending).
	busy bool
}

// same reports whether the stored result of r for the row at at was computed
// from input and is still in the target. A failure reports false: the call
// is made, nothing is lost.
func (l *lookups) same(ctx context.Context, r *Rule, at *lookup, input []byte) bool {
	select {
	case l.sem <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	defer func() { <-l.sem }()
	var conn *pgx.Conn
	select {
	case conn = <-l.idle:
	default:
	}
	if conn == nil || conn.IsClosed() {
		c, err := pgx.Connect(ctx, l.dsn)
		if err != nil {
			return false
		}
		conn = c
	}
	same, err := state.SameInput(ctx, conn, r.Name, at.keyJSON, input)
	if err == nil && same {
		same, err = r.Target.HasValue(ctx, conn, at.key)
	}
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return false
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		conn.Close(context.WithoutCancel(ctx))
		return same
	}
	l.idle <- conn // never blocks: at most n connections exist
	l.mu.Unlock()
	return same
}

// close closes the idle connections, and those still in use when their
// lookup ends.
func (l *lookups) close(ctx context.Context) {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	for {
		select {
		case c := <-l.idle:
			c.Close(ctx)
		default:
			return
		}
	}
}
