package park

import (
	"sync"

	"github.com/pgimageai/pgimageai/state"
)

// Rules knows which rules may have parked rows, and how many the last
// count found. It is safe for concurrent use: lanes tell and ask it, the
// Drainer refreshes it.
//
// Maybe errs on the side of true: a rule is taken as parked from its first
// parking on, and only a count that began after the last parking of the
// rule and found none clears it. A parked row left behind all the same is
// harmless: its replay reads the source row as it is, finds the stored
// result of that input, and only deletes it.
type Rules struct {
	mu     sync.Mutex
	maybe  map[string]bool
	gen    map[string]uint64 // parkings told, per rule
	counts []state.ParkedCount
}

// NewRules returns a Rules with none parked.
func NewRules() *Rules {
	return &Rules{maybe: map[string]bool{}, gen: map[string]uint64{}}
}

// Maybe reports whether some row of rule may be parked.
func (r *Rules) Maybe(rule string) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.maybe[rule]
}

// Parking is told that a row of rule parks.
func (r *Rules) Parking(rule string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.maybe[rule] = true
	r.gen[rule]++
}

// mark returns the parkings told so far, for counted.
func (r *Rules) mark() map[string]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(map[string]uint64, len(r.gen))
	for k, v := range r.gen {
		m[k] = v
	}
	return m
}

// counted takes a count of the parked rows begun when mark was taken.
func (r *Rules) counted(mark map[string]uint64, counts []state.ParkedCount) {
	r.mu.Lock()
	defer r.mu.Unlock()
	found := map[string]bool{}
	for _, c := range counts {
		found[c.Rule] = c.Rows > 0
		if c.Rows > 0 {
			r.maybe[c.Rule] = true
		}
	}
	for rule := range r.maybe {
		if !found[rule] && r.gen[rule] == mark[rule] {
			delete(r.maybe, rule)
		}
	}
	r.counts = counts
}

// Counts returns the last count of parked rows, by rule.
func (r *Rules) Counts() []state.ParkedCount {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]state.ParkedCount(nil), r.counts...)
}
