package engine

import (
	"bytes"
	"fmt"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/sink"
)

// What a change says of its rows and lanes: keys, targets, rule names.

// key decodes the primary key of a tuple into Go values and source_key JSON.
func (e *Engine) key(r *replication.Relation, t replication.Tuple, rel *rules.Relation, rule *rules.Rule) (work.Row, error) {
	if t == nil {
		return work.Row{}, fmt.Errorf("table %s.%s: change without the key tuple (check REPLICA IDENTITY)", r.Namespace, r.Name)
	}
	vals := make([]any, len(rel.Key))
	for i, idx := range rel.Key {
		v, err := replication.DecodeValue(e.typeMap, r.Columns[idx], t[idx])
		if err != nil {
			return work.Row{}, fmt.Errorf("table %s.%s key column %s: %w", r.Namespace, r.Name, r.Columns[idx].Name, err)
		}
		vals[i] = v
	}
	js, err := sink.KeyJSON(e.typeMap, rule.KeyColumns, vals)
	if err != nil {
		return work.Row{}, err
	}
	return work.Row{Key: vals, JSON: js}, nil
}

// rulesOf returns the names of the rules of target t.
func rulesOf(rs []*rules.Rule, t *sink.Target) []string {
	var out []string
	for _, r := range rs {
		if r.Target.Name() == t.Name() {
			out = append(out, r.Name)
		}
	}
	return out
}

// targets returns the distinct target tables of rs, in rule order, that
// follow the source's deletes, key moves and truncates: not the write-back
// ones, whose rows are the source's own.
func targets(rs []*rules.Rule) []*sink.Target {
	var out []*sink.Target
	seen := map[string]bool{}
	for _, r := range rs {
		if !r.Target.WriteBack && !seen[r.Target.Name()] {
			seen[r.Target.Name()] = true
			out = append(out, r.Target)
		}
	}
	return out
}

// writeBacks returns the distinct write-back target tables of rs: their rows
// are the source's own, so a delete or truncate only forgets the stored
// inputs and open errors of the rows that went (a Forget item).
func writeBacks(rs []*rules.Rule) []*sink.Target {
	var out []*sink.Target
	seen := map[string]bool{}
	for _, r := range rs {
		if r.Target.WriteBack && !seen[r.Target.Name()] {
			seen[r.Target.Name()] = true
			out = append(out, r.Target)
		}
	}
	return out
}

func sameKey(a, b replication.Tuple, idx []int) bool {
	for _, i := range idx {
		if a[i].Kind != b[i].Kind || !bytes.Equal(a[i].Data, b[i].Data) {
			return false
		}
	}
	return true
}
