package apply

import (
	"errors"
	"fmt"

	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

// batch turns the items of one lane write into sink ops: results with their
// errors rows or resolutions, deletes, moves, truncates, backfill progress,
// and the provider usage of the calls they hold.
type batch struct {
	ops     []sink.Op
	usage   map[[2]string]*state.Usage // by rule and model
	own     bool                       // writes a source table (write-back)
	rows    map[string]int             // by op, for metrics
	reasons map[string]int             // errors rows by reason, for metrics
	errorsN int
	capped  []capped  // the errors rows, each of which the cap may refuse
	run     resultRun // results not yet turned into ops
	parked  Parked    // rules that may have parked rows; nil = none
}

// mayPark reports whether some rule of rules may have parked rows, whose
// parked row a write for them must then delete.
func (b *batch) mayPark(rules ...string) bool {
	if b.parked == nil {
		return false
	}
	for _, r := range rules {
		if b.parked.Maybe(r) {
			return true
		}
	}
	return false
}

// add appends the ops of one item.
func (b *batch) add(it *work.Item) {
	if it.Kind != work.Result {
		b.flush()
	}
	switch it.Kind {
	case work.Move:
		b.ops = append(b.ops, sink.Move{Target: it.Dest.Target, OldKey: it.Old.Key, NewKey: it.Row.Key},
			state.RekeyErrors{SourceTable: it.Dest.SourceTable, OldKey: it.Old.JSON, NewKey: it.Row.JSON, Rules: it.Dest.Rules})
		if b.mayPark(it.Dest.Rules...) {
			b.ops = append(b.ops, state.RekeyParked{Rules: it.Dest.Rules, OldKey: it.Old.JSON, NewKey: it.Row.JSON})
		}
		b.count("move")
	case work.Delete:
		b.ops = append(b.ops, sink.Delete{Target: it.Dest.Target, Key: it.Row.Key},
			state.ForgetRow{SourceTable: it.Dest.SourceTable, Key: it.Row.JSON, Rules: it.Dest.Rules})
		if b.mayPark(it.Dest.Rules...) {
			b.ops = append(b.ops, state.UnparkRows{Rules: it.Dest.Rules, Key: it.Row.JSON})
		}
		b.count("delete")
	case work.Truncate:
		b.ops = append(b.ops, sink.Truncate{Target: it.Dest.Target}, state.ForgetRow{SourceTable: it.Dest.SourceTable, Rules: it.Dest.Rules})
		b.ops = append(b.ops, it.Ops...) // the bookkeeping of a new source table's emptying, in its transaction
		if b.mayPark(it.Dest.Rules...) {
			b.ops = append(b.ops, state.UnparkRows{Rules: it.Dest.Rules})
		}
		b.count("truncate")
	case work.Result:
		b.result(it)
	case work.Backfill:
		b.ops = append(b.ops, it.Progress)
	case work.Resolve:
		b.ops = append(b.ops, state.Resolve{Rule: it.Rule.Name, Key: it.Row.JSON})
	case work.Forget:
		b.ops = append(b.ops, state.ForgetRow{SourceTable: it.Dest.SourceTable, Key: it.Row.JSON, Rules: it.Dest.Rules})
		if b.mayPark(it.Dest.Rules...) {
			b.ops = append(b.ops, state.UnparkRows{Rules: it.Dest.Rules, Key: it.Row.JSON})
		}
	case work.Unpark:
		b.ops = append(b.ops, state.Unpark{Rule: it.Rule.Name, Keys: []string{string(it.Row.JSON)}})
	case work.Switch, work.DropShadow:
		b.ops = append(b.ops, it.Ops...)
		b.count(it.Kind.String())
	}
}

func (b *batch) count(op string) {
	if b.rows == nil {
		b.rows = map[string]int{}
	}
	b.rows[op]++
}

// result appends the ops of one function result: the value (NULL on
// failure), and the errors row or the resolution of earlier ones.
func (b *batch) result(it *work.Item) {
	if it.Call != nil && it.Call.Unchanged {
		// The stored result is this input's: nothing to write, but the row
		// waits no longer.
		if b.mayPark(it.Rule.Name) {
			b.ops = append(b.ops, state.Unpark{Rule: it.Rule.Name, Keys: []string{string(it.Row.JSON)}})
		}
		return
	}
	var res functions.Result
	var err error
	if it.Call == nil {
		res = functions.Result{Null: true}
	} else {
		res, err = it.Call.Result, it.Call.Err
	}
	if p := work.ParkedBy(err); p != nil {
		// The model is down: the row waits in pgimageai.parked, the target
		// row keeps what it holds, and the lane's checkpoint moves past it.
		b.flush()
		b.ops = append(b.ops, state.Park{Rule: it.Rule.Name, SourceTable: it.Dest.SourceTable, Key: it.Row.JSON,
			Model: it.Rule.Model, LSN: it.LSN, Cause: p.Cause, Replay: it.Replay})
		if b.parked != nil {
			b.parked.Parking(it.Rule.Name)
		}
		b.count("park")
		return
	}
	if b.mayPark(it.Rule.Name) {
		// Whatever this writes is newer than what parked: the row waits no
		// longer.
		b.ops = append(b.ops, state.Unpark{Rule: it.Rule.Name, Keys: []string{string(it.Row.JSON)}})
	}
	if err == nil && !res.Null && it.Dest.Target.Dim > 0 && len(res.Vector) != it.Dest.Target.Dim {
		err = &functions.Error{Reason: functions.BadResponse, ImageBytes: it.Call.Size, ImageHead: it.Call.Head,
			Detail: fmt.Sprintf("model %s returned a vector of %d dimensions; target column %s.%s is vector(%d)",
				it.Rule.Model, len(res.Vector), it.Dest.Target.Name(), it.Dest.Target.Column, it.Dest.Target.Dim)}
		res = functions.Result{Null: true}
	}
	var value any
	switch {
	case err != nil || res.Null:
	case it.Rule.Fn == functions.Embed:
		value = res.Vector
	default:
		value = res.Text
	}
	b.count("upsert")
	if it.Call != nil && !it.Call.Hit && it.Call.Err == nil {
		b.countUsage(it.Rule, res.Usage)
	}
	var inputKey []byte
	if err == nil && !res.Null && it.Call != nil && it.Call.Key != nil {
		inputKey = it.Call.Key[:]
	}
	many := it.Dest.Target.Many()
	if many && !b.run.fits(it) {
		b.flush()
	}
	if many {
		b.run.add(it, value, inputKey, err == nil)
	} else {
		b.flush()
		b.ops = append(b.ops, sink.Upsert{Target: it.Dest.Target, Key: it.Row.Key, Value: value},
			state.ResultInput{Rule: it.Rule.Name, Key: it.Row.JSON, InputKey: inputKey, Version: it.Rule.Version})
		if err == nil {
			b.ops = append(b.ops, state.Resolve{Rule: it.Rule.Name, Key: it.Row.JSON})
		}
		b.own = b.own || it.Dest.Target.WriteBack
	}
	if err == nil {
		return
	}
	b.errorsN++
	row := state.Error{Rule: it.Rule.Name, SourceTable: it.Dest.SourceTable, Key: it.Row.JSON, LSN: it.LSN,
		Reason: string(functions.ProviderError), Detail: err.Error()}
	var fe *functions.Error
	if errors.As(err, &fe) {
		row.Reason, row.Detail = string(fe.Reason), fe.Detail
		if fe.ImageBytes >= 0 {
			n := fe.ImageBytes
			row.ImageBytes, row.ImageHead = &n, fe.ImageHead
		}
	}
	if it.Call != nil && it.Call.Key != nil && functions.Permanent(err) {
		row.InputKey = it.Call.Key[:]
		if row.ImageBytes == nil { // a failure remembered from an earlier run
			n := it.Call.Size
			row.ImageBytes, row.ImageHead = &n, it.Call.Head
		}
	}
	if b.reasons == nil {
		b.reasons = map[string]int{}
	}
	b.reasons[row.Reason]++
	row.Dropped = new(bool)
	b.capped = append(b.capped, capped{rule: row.Rule, reason: row.Reason, dropped: row.Dropped})
	if many {
		b.run.errors = append(b.run.errors, row)
	} else {
		b.ops = append(b.ops, row)
	}
}

// capped is an errors row of the batch: its rule and reason, and whether
// the write found the rule at its cap (set by each attempt of the write).
type capped struct {
	rule, reason string
	dropped      *bool
}

// dropped returns, once the batch committed, the failures that the cap
// kept out of pgimageai.errors, by rule and reason, and takes them out of
// the batch's count of errors rows written.
func (b *batch) dropped() map[[2]string]int {
	var out map[[2]string]int
	for _, c := range b.capped {
		if !*c.dropped {
			continue
		}
		if out == nil {
			out = map[[2]string]int{}
		}
		out[[2]string{c.rule, c.reason}]++
		b.reasons[c.reason]--
		b.errorsN--
	}
	return out
}

// countUsage adds one answered call and its tokens to the batch's usage.
// Calls served by the cache cost nothing and are not counted.
func (b *batch) countUsage(r *work.Rule, u provider.Usage) {
	if b.usage == nil {
		b.usage = map[[2]string]*state.Usage{}
	}
	k := [2]string{r.Name, r.Model}
	agg := b.usage[k]
	if agg == nil {
		agg = &state.Usage{Rule: r.Name, Model: r.Model}
		b.usage[k] = agg
	}
	agg.Calls++
	agg.PromptTokens += int64(u.PromptTokens)
	agg.CompletionTokens += int64(u.CompletionTokens)
}

// final returns the batch's ops: the OwnWrites marker first when the batch
// writes to a source table (write-back), so that the bridge ignores those
// changes when it reads them back from the WAL (note receives the
// transaction's ID), and the usage last.
func (b *batch) final(note func(xid uint64)) []sink.Op {
	b.flush()
	ops := b.ops
	if b.own {
		ops = append([]sink.Op{state.OwnWrites{Note: note}}, ops...)
	}
	for _, u := range b.usage {
		ops = append(ops, *u)
	}
	return ops
}

// flush turns the results collected in the run into ops.
func (b *batch) flush() {
	b.ops = b.run.ops(b.ops)
	b.run = resultRun{}
}

// resultRun collects consecutive results of distinct rows, written with one
// statement per target column and rule rather than three per row (see
// sink.Upserts): the database's share of a write is most of its cost. A run
// holds each (rule, row) and each (column, row) once, so the order of its
// statements cannot matter: ops of different rows commute. Anything else in
// a lane's items (a delete, a move, a truncate, a second result for a row
// of the run) ends the run first, keeping each row's changes in order.
type resultRun struct {
	seen     map[string]bool
	upserts  []*sink.Upserts       // in order of first use
	inputs   []*state.ResultInputs // by rule, in order of first use
	resolves []*state.Resolves
	errors   []sink.Op
}

func (r *resultRun) rowKeys(it *work.Item) (byRule, byColumn string) {
	return "r\x00" + it.Rule.Name + "\x00" + string(it.Row.JSON),
		"c\x00" + it.Dest.Target.Name() + "\x00" + it.Dest.Target.Column + "\x00" + string(it.Row.JSON)
}

// fits reports whether it's row is not in the run yet.
func (r *resultRun) fits(it *work.Item) bool {
	byRule, byColumn := r.rowKeys(it)
	return !r.seen[byRule] && !r.seen[byColumn]
}

// add adds one result: value into its column, the input it was computed
// from (nil: none), and the resolution of the row's open errors when ok.
func (r *resultRun) add(it *work.Item, value any, inputKey []byte, ok bool) {
	if r.seen == nil {
		r.seen = map[string]bool{}
	}
	byRule, byColumn := r.rowKeys(it)
	r.seen[byRule], r.seen[byColumn] = true, true
	key := string(it.Row.JSON)
	u := groupOf(&r.upserts, func(x *sink.Upserts) bool { return x.Target == it.Dest.Target },
		func() *sink.Upserts { return &sink.Upserts{Target: it.Dest.Target} })
	u.Keys, u.Values = append(u.Keys, key), append(u.Values, value)
	in := groupOf(&r.inputs, func(x *state.ResultInputs) bool { return x.Rule == it.Rule.Name && x.Version == it.Rule.Version },
		func() *state.ResultInputs { return &state.ResultInputs{Rule: it.Rule.Name, Version: it.Rule.Version} })
	in.Keys, in.InputKeys = append(in.Keys, key), append(in.InputKeys, inputKey)
	if ok {
		res := groupOf(&r.resolves, func(x *state.Resolves) bool { return x.Rule == it.Rule.Name },
			func() *state.Resolves { return &state.Resolves{Rule: it.Rule.Name} })
		res.Keys = append(res.Keys, key)
	}
}

// groupOf returns the group of *groups that is, or a new one appended: a
// run has a group per target column or rule, a handful at most.
func groupOf[T any](groups *[]*T, is func(*T) bool, fresh func() *T) *T {
	for _, g := range *groups {
		if is(g) {
			return g
		}
	}
	g := fresh()
	*groups = append(*groups, g)
	return g
}

// ops appends the run's ops to ops.
func (r *resultRun) ops(ops []sink.Op) []sink.Op {
	for _, u := range r.upserts {
		ops = append(ops, *u)
	}
	for _, in := range r.inputs {
		ops = append(ops, *in)
	}
	for _, res := range r.resolves {
		ops = append(ops, *res)
	}
	return append(ops, r.errors...)
}
