package cost

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/internal/reconn"
	"github.com/pgimageai/pgimageai/state"
)

// Never pay twice for the same image: pgimageai.results keeps, per rule and
// row, what the stored result was computed from; a change whose input is the
// same makes no call and writes nothing. The stored input is only trusted
// when no earlier change of the same row is still waiting in its lane
// (apply.RowCounts): otherwise that change, written later, would replace the
// result the comparison relied on.

// Lookup is where a stored input is compared: a row's key, as source_key
// JSON and as values, in a lane.
type Lookup struct {
	Lane    string
	KeyJSON []byte
	Key     []any
	// Busy: an earlier change of the row waits in the lane; the stored
	// input is not compared, the change may follow that one's call instead
	// (apply.RowCounts.Pending).
	Busy bool
}

// Lookups is a small pool of target connections on which call goroutines
// read the stored inputs. It is safe for concurrent use.
type Lookups struct {
	mu     sync.Mutex
	closed bool // after Close, connections are closed, not kept
	dsn    string
	sem    chan struct{}     // a slot per connection in use
	idle   chan *reconn.Conn // connections not in use
}

// NewLookups returns a pool of at most n connections to the target dsn.
func NewLookups(dsn string, n int) *Lookups {
	return &Lookups{dsn: dsn, sem: make(chan struct{}, n), idle: make(chan *reconn.Conn, n)}
}

// Same reports whether the stored result of r for the row at at was
// computed from input and is still in the target. A failure reports false:
// the call is made, nothing is lost.
func (l *Lookups) Same(ctx context.Context, r *rules.Rule, at *Lookup, input []byte) bool {
	select {
	case l.sem <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	defer func() { <-l.sem }()
	var conn *reconn.Conn
	select {
	case conn = <-l.idle:
	default:
		conn = reconn.New("target", l.dsn, nil)
	}
	same := false
	if conn.Do(ctx, func(c *pgx.Conn) error {
		var err error
		same, err = state.SameInput(ctx, c, r.Name, at.KeyJSON, input)
		if err == nil && same {
			same, err = r.Target.HasValue(ctx, c, at.Key)
		}
		return err
	}) != nil {
		same = false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		conn.Drop(context.WithoutCancel(ctx))
		return same
	}
	l.idle <- conn // never blocks: at most n connections exist
	return same
}

// Close closes the idle connections, and those still in use when their
// lookup ends.
func (l *Lookups) Close(ctx context.Context) {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	for {
		select {
		case c := <-l.idle:
			c.Drop(ctx)
		default:
			return
		}
	}
}
