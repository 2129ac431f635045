package apply

import (
	"sync"

	"github.com/pgimageai/pgimageai/bridge/cost"
	"github.com/pgimageai/pgimageai/bridge/work"
)

// Never pay twice for the same image: the stored input of a row
// (cost.Lookups) is only trusted when no earlier change of the same row is
// still waiting in its lane (RowCounts): otherwise that change, written
// later, would replace the result the comparison relied on. Such a change is
// compared with that earlier change instead: when the last item routed for the row and rule is
// a result of the same input, with nothing after it that moves, deletes or
// truncates the row, the new change follows its call (pending) — without
// this, a row changed twice while its lane is busy paid again after every
// restart (the cache is empty then; TestChaosNeverPayTwice).

// RowCounts counts, per lane and row, the items routed and not yet written;
// a truncate counts for every row of its lane. It is safe for concurrent use:
// the engine adds, lanes remove.
type RowCounts struct {
	mu sync.Mutex
	n  map[string]int
	// last holds, per lane and row, the call of the last result item routed
	// for the row, by rule, while it waits and nothing routed after it
	// moved, deleted or truncated the row.
	last map[string]map[string]*work.Call
}

func rowKey(lane string, key []byte) string { return lane + "\x00" + string(key) }

// Route counts the rows item it touches in lane, and remembers the call of
// a result (see pending).
func (c *RowCounts) Route(lane string, it *work.Item) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n, c.last = map[string]int{}, map[string]map[string]*work.Call{}
	}
	keys := it.Rows()
	for _, k := range keys {
		c.n[rowKey(lane, k)]++
	}
	if it.Kind != work.Result || it.Rule == nil {
		for _, k := range keys {
			delete(c.last, rowKey(lane, k))
		}
		return
	}
	rk := rowKey(lane, it.Row.JSON)
	if it.Call == nil || it.Call.Key == nil { // a NULL result, or no provider asked
		delete(c.last[rk], it.Rule.Name)
		return
	}
	if c.last[rk] == nil {
		c.last[rk] = map[string]*work.Call{}
	}
	c.last[rk][it.Rule.Name] = it.Call
}

// Done uncounts the rows of items written in lane.
func (c *RowCounts) Done(lane string, keys ...[]byte) {
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

// Busy reports whether the row keyed key of lane has an item waiting.
func (c *RowCounts) Busy(lane string, key []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[rowKey(lane, key)] > 0 || c.n[rowKey(lane, []byte(work.AllRows))] > 0
}

// At returns where the stored input of the row keyed keyJSON (key as
// values) of lane is compared, noting whether an earlier change of the row
// waits in the lane.
func (c *RowCounts) At(lane string, keyJSON []byte, key []any) *cost.Lookup {
	return &cost.Lookup{Lane: lane, KeyJSON: keyJSON, Key: key, Busy: c.Busy(lane, keyJSON)}
}

// Pending returns the call that a change of input k for rule at a busy row
// (at.Busy) follows: that of the last result routed for the row and rule,
// when it had the same input and nothing after it moved, deleted or
// truncated the row; nil otherwise. Whatever that item leaves in the target
// — a result computed from k, or the stored one of the same input — is what
// the change would leave.
func (c *RowCounts) Pending(at *cost.Lookup, rule string, k work.Key) *work.Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[rowKey(at.Lane, []byte(work.AllRows))] > 0 {
		return nil
	}
	p := c.last[rowKey(at.Lane, at.KeyJSON)][rule]
	if p == nil || p.Key == nil || *p.Key != k {
		return nil
	}
	return p
}
