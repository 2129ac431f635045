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
// result the comparison relied on.

// rowCounts counts, per lane and row, the items routed and not yet written;
// a truncate counts for every row of its lane. It is safe for concurrent use:
// the engine adds, lanes remove.
type rowCounts struct {
	mu sync.Mutex
	n  map[string]int
}

// allRows stands for every row of a lane (a truncate).
const allRows = "*"

func rowKey(lane string, key []byte) string { return lane + "\x00" + string(key) }

func (c *rowCounts) add(lane string, keys ...[]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	for _, k := range keys {
		c.n[rowKey(lane, k)]++
	}
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
		}
	}
}

// busy reports whether the row keyed key of lane has an item waiting.
func (c *rowCounts) busy(lane string, key []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[rowKey(lane, key)] > 0 || c.n[rowKey(lane, []byte(allRows))] > 0
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
	keyJSON []byte
	key     []any
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
