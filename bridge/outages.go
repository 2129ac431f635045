package bridge

import (
	"sort"

	"github.com/pgimageai/pgimageai/internal/circuit"
	"github.com/pgimageai/pgimageai/metrics"
)

// outages reports the models' circuits — every model the valid rules call,
// up unless its circuit is open — and the rules' parked rows, for
// /metrics. It reports nothing while this instance does not lead.
func (b *Bridge) outages() metrics.Outages {
	r := b.run.Load()
	if r == nil || b.lock == nil || !b.lock.Held() {
		return metrics.Outages{}
	}
	models := map[string]metrics.ModelUp{}
	ruleModels := r.engine.RuleModels()
	for _, m := range ruleModels {
		models[m] = metrics.ModelUp{Model: m, Up: true}
	}
	for _, ep := range r.breaker.Endpoints() {
		if _, ok := models[ep.Name]; ok && ep.State == circuit.Down {
			models[ep.Name] = metrics.ModelUp{Model: ep.Name, Since: ep.Since}
		}
	}
	var o metrics.Outages
	for _, m := range models {
		o.Models = append(o.Models, m)
	}
	sort.Slice(o.Models, func(i, j int) bool { return o.Models[i].Model < o.Models[j].Model })
	// Every valid rule, 0 when none of its rows is parked; and a rule no
	// longer valid while rows of it stay parked.
	parked := map[string]int64{}
	for rule := range ruleModels {
		parked[rule] = 0
	}
	for _, c := range r.parked.Counts() {
		parked[c.Rule] = c.Rows
	}
	for rule, n := range parked {
		o.Parked = append(o.Parked, metrics.Parked{Rule: rule, Rows: n})
	}
	sort.Slice(o.Parked, func(i, j int) bool { return o.Parked[i].Rule < o.Parked[j].Rule })
	return o
}
