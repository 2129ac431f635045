package engine

import (
	"bytes"
	"context"
	"fmt"

	"github.com/pgimageai/pgimageai/bridge/cost"
	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

// What a row change means for the rules of its table: per rule, what
// decide says (decide.go), the call started for it (calls.go), and the
// items routed to their lanes (route.go).

// rowNotes is what a row change tells the running backfills of its table
// (streamed): a page read before must not bring back an older version.
type rowNotes interface {
	touch(oid uint32, keyJSON []byte)
	truncate(oid uint32)
}

// reloader reloads the rules, at once (config.go).
type reloader interface {
	reconfigure(ctx context.Context, what string, prepare func() error) error
	misfit(ctx context.Context, why map[string]string) error
}

// rowWork turns the row changes of source tables into items.
type rowWork struct {
	*base
	res   *results
	notes rowNotes
	cfg   reloader
	// retyped is the last relation whose key types made the rules compile
	// again (see relation): once per relation, however the catalog stands.
	retyped *replication.Relation
}

// placed is an item and its position, before it is emitted.
type placed struct {
	pos state.Position
	it  work.Item
}

// change routes what an INSERT, UPDATE or DELETE means for the rules of
// its table.
func (w *rowWork) change(ctx context.Context, ch *replication.Change) error {
	if len(w.rules.set.ForSource(ch.Relation.OID)) == 0 {
		return nil
	}
	rel, rs, err := w.relation(ctx, ch.Relation)
	if err != nil || len(rs) == 0 {
		return err
	}
	if ch.Op == replication.Delete {
		return w.delete(ctx, ch, rel, rs)
	}
	return w.upsert(ctx, ch, rel, rs)
}

// delete routes a DELETE: the row goes from each target, and a write-back
// target forgets its stored inputs and open errors.
func (w *rowWork) delete(ctx context.Context, ch *replication.Change, rel *rules.Relation, rs []*rules.Rule) error {
	row, err := w.key(ch.Relation, ch.Old, rel, rs[0])
	if err != nil {
		return err
	}
	w.notes.touch(ch.Relation.OID, row.JSON)
	return w.eachTarget(ctx, rs, 0, func(t target) work.Item {
		return work.Item{Kind: t.kind(work.Delete), Dest: t.dest, Row: row, LSN: ch.LSN}
	})
}

// eachTarget places, from item sub on, one item per target table of rs:
// the ones that follow the source first, then the write-back ones (their
// kind Forget), so that the others' ordinals stay.
func (w *rowWork) eachTarget(ctx context.Context, rs []*rules.Rule, sub int, item func(t target) work.Item) error {
	for _, t := range targetsOf(rs) {
		if err := w.out.place(ctx, sub, item(t)); err != nil {
			return err
		}
		sub++
	}
	return nil
}

// upsert routes an INSERT or UPDATE: a key move first when the key
// changed, then per rule what decide says.
func (w *rowWork) upsert(ctx context.Context, ch *replication.Change, rel *rules.Relation, rs []*rules.Rule) error {
	row, err := w.key(ch.Relation, ch.New, rel, rs[0])
	if err != nil {
		return err
	}
	w.notes.touch(ch.Relation.OID, row.JSON)
	// Where each lane's stored input is compared (cost.Lookups): at the
	// row's key, or — for a key move, whose Move carries the result and its
	// input along — at its old key; while an earlier change of the row
	// waits in the lane, with that change's input instead. An INSERT has
	// nothing stored to compare with: a row's stored input goes with its
	// DELETE (and moves with its key), so the read would only cost a round
	// trip per new row.
	look := map[string]*cost.Lookup{}
	rows := w.lanes.Rows()
	if ch.Op == replication.Update {
		for _, r := range rs {
			look[r.Target.Name()] = rows.At(r.Target.Name(), row.JSON, row.Key)
		}
	}
	var emits []placed // in position order: moves first, then results
	sub := 0
	if ch.Op == replication.Update && ch.Old != nil && !sameKey(ch.Old, ch.New, rel.Key) {
		if emits, sub, err = w.moves(ch, rel, rs, row, look); err != nil {
			return err
		}
	}
	moves := len(emits)
	for _, r := range rs {
		pos, ok := w.out.admit(r.Target.Name(), sub)
		sub++
		if !ok {
			continue
		}
		it, ok, err := w.rowResult(ctx, ch, rel, r, row, look[r.Target.Name()])
		if err != nil {
			return err
		}
		if ok {
			emits = append(emits, placed{pos, it})
		}
	}
	// A Move waits for the calls of its row's results in its lane: their
	// stored inputs are compared at the old key, which the Move changes
	// once written.
	for i := range emits[:moves] {
		for _, p := range emits[moves:] {
			if p.it.Call != nil && p.it.Dest.Target.Name() == emits[i].it.Dest.Target.Name() {
				emits[i].it.Waits = append(emits[i].it.Waits, p.it.Call)
			}
		}
	}
	for _, p := range emits {
		if err := w.out.emit(ctx, p.pos, p.it); err != nil {
			return err
		}
	}
	return nil
}

// moves returns the Move items of an UPDATE that changed the row's key to
// row, one per target that follows the source, and the next item's number;
// each lane's stored input is then compared at the old key (see upsert).
func (w *rowWork) moves(ch *replication.Change, rel *rules.Relation, rs []*rules.Rule, row work.Row, look map[string]*cost.Lookup) ([]placed, int, error) {
	old, err := w.key(ch.Relation, ch.Old, rel, rs[0])
	if err != nil {
		return nil, 0, err
	}
	w.notes.touch(ch.Relation.OID, old.JSON)
	rows := w.lanes.Rows()
	for _, r := range rs {
		if lane := r.Target.Name(); !r.Target.WriteBack && look[lane] != nil && !look[lane].Busy {
			look[lane] = rows.At(lane, old.JSON, old.Key)
		} else if !r.Target.WriteBack {
			look[lane] = nil
		}
	}
	var out []placed
	sub := 0
	for _, t := range targetsOf(rs) {
		if t.dest.Target.WriteBack {
			continue // its rows are the source's own: they move with it
		}
		if pos, ok := w.out.admit(t.dest.Target.Name(), sub); ok {
			out = append(out, placed{pos, work.Item{Kind: work.Move, Dest: t.dest, Row: row, Old: old, LSN: ch.LSN}})
		}
		sub++
	}
	return out, sub, nil
}

// rowResult does what an INSERT or UPDATE means for rule r (see decide): a
// call, a NULL result, or nothing (ok false) when neither the image nor a
// column its prompt names changed. It reads what decide asks for from the
// source row, and starts the call.
func (w *rowWork) rowResult(ctx context.Context, ch *replication.Change, rel *rules.Relation, r *rules.Rule, row work.Row, look *cost.Lookup) (work.Item, bool, error) {
	idx := rel.Image[r.ImageColumn]
	c := rowChange{op: ch.Op, image: ch.New[idx]}
	if ch.Old != nil {
		c.oldImage = &ch.Old[idx]
	}
	if r.Template != nil {
		var err error
		if c.values, c.unchanged, err = w.templateValues(ch.Relation, ch.New, r.Template, r.Fn.MaxPromptBytes()); err != nil {
			return work.Item{}, false, fmt.Errorf("rule %s at %s: %w", r.Name, ch.LSN, err)
		}
		c.lastPrompt = w.res.memo.last(r.Name, row.JSON)
	}
	d, err := decide(r, c)
	if err == nil && d.act == actFetch {
		// Unchanged TOAST is not empty: read the values from the row.
		var gone bool
		if c.fetched, gone, err = w.fetchRow(ctx, r, row, c.unchanged, d.fetch); gone {
			return work.Item{}, false, nil // deleted since; its DELETE follows
		}
		if err == nil {
			d, err = decide(r, c)
		}
	}
	if err != nil {
		return work.Item{}, false, fmt.Errorf("%s.%s at %s: %w", r.Source, r.ImageColumn, ch.LSN, err)
	}
	it, ok, err := w.res.decided(ctx, r, row, d, look)
	it.LSN = ch.LSN
	return it, ok, err
}

// truncate routes a TRUNCATE: each target of the tables' rules is emptied,
// and a write-back target forgets its stored inputs and open errors. A
// truncate of the configuration's tables is a configuration change.
func (w *rowWork) truncate(ctx context.Context, ch *replication.Change) error {
	sub := 0
	for _, r := range ch.Truncated {
		if w.rules.tables.config(r.OID) {
			w.out.open.config = append(w.out.open.config, rules.Change{Models: r.OID == w.rules.tables.Models, Ch: &replication.Change{Op: replication.Truncate}})
			continue
		}
		rs := w.rules.set.ForSource(r.OID)
		w.notes.truncate(r.OID) // pages read before it must not bring rows back
		err := w.eachTarget(ctx, rs, sub, func(t target) work.Item {
			return work.Item{Kind: t.kind(work.Truncate), Dest: t.dest, LSN: ch.LSN}
		})
		if err != nil {
			return err
		}
		sub += len(targetsOf(rs))
	}
	return nil
}

// relation returns the column positions of r, computed once per Relation,
// and the rules of its table. A rule that the table no longer fits (its image
// column renamed, dropped or no longer bytea, or the primary key changed)
// becomes invalid_rule here, at this WAL position, while the other rules go
// on (see rules.Live.Misfit). A key whose type changed makes the rules
// compile again here, before the first change of the new shape is routed:
// their targets follow a widening (sink.Ensure) and their statements and
// keys take the new type.
func (w *rowWork) relation(ctx context.Context, r *replication.Relation) (*rules.Relation, []*rules.Rule, error) {
	for {
		rs := w.rules.set.ForSource(r.OID)
		if rel, ok := w.rules.set.Relation(r); ok || len(rs) == 0 {
			return rel, rs, nil
		}
		rel, misfits := rules.Fit(r, rs)
		if len(misfits) == 0 && rel.Retyped && w.retyped != r {
			w.retyped = r
			// Fresh sessions: a statement the engine's sessions prepared
			// for the old key types (a backfill's last-row query) would
			// fail with "cached plan must not change result type".
			w.conns.Close(ctx)
			if err := w.cfg.reconfigure(ctx, fmt.Sprintf("following the key type change of %s", r.Identifier().Sanitize()), nil); err != nil {
				return nil, nil, err
			}
			continue
		}
		if len(misfits) == 0 {
			w.rules.set.Remember(r, rel)
			return rel, rs, nil
		}
		if err := w.cfg.misfit(ctx, misfits); err != nil {
			return nil, nil, err
		}
	}
}

// What a change says of its rows and lanes: keys, targets, rule names.

// key decodes the primary key of a tuple into Go values and source_key JSON.
func (b *base) key(r *replication.Relation, t replication.Tuple, rel *rules.Relation, rule *rules.Rule) (work.Row, error) {
	if t == nil {
		return work.Row{}, fmt.Errorf("table %s.%s: change without the key tuple (check REPLICA IDENTITY)", r.Namespace, r.Name)
	}
	vals := make([]any, len(rel.Key))
	for i, idx := range rel.Key {
		v, err := replication.DecodeValue(b.typeMap, r.Columns[idx], t[idx])
		if err != nil {
			return work.Row{}, fmt.Errorf("table %s.%s key column %s: %w", r.Namespace, r.Name, r.Columns[idx].Name, err)
		}
		vals[i] = v
	}
	js, err := sink.KeyJSON(b.typeMap, rule.KeyColumns, vals)
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

// target is a target table of a source table's rules, as a delete, key
// move or truncate of the source reaches it.
type target struct{ dest work.Dest }

// kind is what a source's delete or truncate (k) does to t: a write-back
// target's rows are the source's own, so it only forgets the stored inputs
// and open errors of the rows that went (a Forget item).
func (t target) kind(k work.Kind) work.Kind {
	if t.dest.Target.WriteBack {
		return work.Forget
	}
	return k
}

// targetsOf returns the distinct target tables of rs, in rule order: those
// that follow the source's deletes, key moves and truncates first, then
// the write-back ones.
func targetsOf(rs []*rules.Rule) []target {
	var follow, back []target
	seen := map[string]bool{}
	for _, r := range rs {
		if seen[r.Target.Name()] {
			continue
		}
		seen[r.Target.Name()] = true
		t := target{work.Dest{Target: r.Target, Rules: rulesOf(rs, r.Target), SourceTable: rs[0].Source.String()}}
		if r.Target.WriteBack {
			back = append(back, t)
		} else {
			follow = append(follow, t)
		}
	}
	return append(follow, back...)
}

func sameKey(a, b replication.Tuple, idx []int) bool {
	for _, i := range idx {
		if a[i].Kind != b[i].Kind || !bytes.Equal(a[i].Data, b[i].Data) {
			return false
		}
	}
	return true
}
