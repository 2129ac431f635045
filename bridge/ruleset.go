package bridge

import "github.com/pgimageai/pgimageai/replication"

// ruleSet is the valid rules as of one WAL position: built whole by the
// loader at the commit that changes the configuration, then swapped in and
// never changed (lanes read it from their goroutines). It also caches, per
// *replication.Relation, where the key and image columns of its rules are.
type ruleSet struct {
	bySource map[uint32][]*Rule // by source table OID, in rule name order
	byTarget map[string][]*Rule // by target table (lane)
	byName   map[string]*Rule

	// rels is filled lazily by the engine's goroutine only; a new set
	// starts empty, so positions are computed again for the new rules.
	rels map[*replication.Relation]*relation
}

// newRuleSet indexes valid.
func newRuleSet(valid []*Rule) *ruleSet {
	s := &ruleSet{bySource: map[uint32][]*Rule{}, byTarget: map[string][]*Rule{}, byName: map[string]*Rule{},
		rels: map[*replication.Relation]*relation{}}
	for _, r := range valid {
		s.bySource[r.Source.OID] = append(s.bySource[r.Source.OID], r)
		s.byTarget[r.Target.Name()] = append(s.byTarget[r.Target.Name()], r)
		s.byName[r.Name] = r
	}
	return s
}
