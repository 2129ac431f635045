package rules

import (
	"github.com/pgimageai/pgimageai/provider/pace"
	"github.com/pgimageai/pgimageai/replication"
	"sort"
)

// Set is the valid rules as of one WAL position: built whole by Live at the
// commit that changes the configuration, then swapped in by the engine and
// never changed (lanes read it from their goroutines). It also caches, per
// *replication.Relation, where the key and image columns of its rules are;
// that cache is the engine goroutine's alone.
type Set struct {
	bySource map[uint32][]*Rule // by source table OID, in rule name order
	byTarget map[string][]*Rule // by target table (lane)
	byName   map[string]*Rule

	// rels is filled lazily by the engine's goroutine only; a new set
	// starts empty, so positions are computed again for the new rules.
	rels map[*replication.Relation]*Relation
}

// NewSet indexes valid.
func NewSet(valid []*Rule) *Set {
	s := &Set{bySource: map[uint32][]*Rule{}, byTarget: map[string][]*Rule{}, byName: map[string]*Rule{},
		rels: map[*replication.Relation]*Relation{}}
	for _, r := range valid {
		s.bySource[r.Source.OID] = append(s.bySource[r.Source.OID], r)
		s.byTarget[r.Target.Name()] = append(s.byTarget[r.Target.Name()], r)
		s.byName[r.Name] = r
	}
	return s
}

// ForSource returns the rules of source table oid, in rule name order.
func (s *Set) ForSource(oid uint32) []*Rule { return s.bySource[oid] }

// ForTarget returns the rules that write target table (lane) name.
func (s *Set) ForTarget(name string) []*Rule { return s.byTarget[name] }

// Named returns the rule called name, nil when it is not valid.
func (s *Set) Named(name string) *Rule { return s.byName[name] }

// Governors returns the governor of each model the set's rules call (by
// models.name), leaving out models whose provider paces nothing (local).
func (s *Set) Governors() map[string]*pace.Governor {
	gs := map[string]*pace.Governor{}
	for _, r := range s.byName {
		if g := r.Fn.Pace(); g != nil {
			gs[r.Model] = g
		}
	}
	return gs
}

// Models returns the names of the models the set's rules call.
func (s *Set) Models() map[string]bool {
	ms := map[string]bool{}
	for _, r := range s.byName {
		ms[r.Model] = true
	}
	return ms
}

// Len is how many rules the set holds.
func (s *Set) Len() int { return len(s.byName) }

// Relation returns where r holds the columns of the set's rules, computed
// once per Relation by the engine's goroutine; ok is false before.
func (s *Set) Relation(r *replication.Relation) (rel *Relation, ok bool) {
	rel, ok = s.rels[r]
	return rel, ok
}

// Remember caches rel as r's positions (see Relation).
func (s *Set) Remember(r *replication.Relation, rel *Relation) { s.rels[r] = rel }

// Sides returns the side rules of the rules whose new version is computed
// on the side, in name order.
func (s *Set) Sides() []*Rule {
	var out []*Rule
	for _, r := range s.byName {
		if r.Switching != nil && r.Switching.Side {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// RuleModels returns the models.name each of the set's rules calls, by rule.
func (s *Set) RuleModels() map[string]string {
	ms := make(map[string]string, len(s.byName))
	for name, r := range s.byName {
		ms[name] = r.Model
	}
	return ms
}
