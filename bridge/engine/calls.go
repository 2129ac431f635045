package engine

import (
	"context"

	"github.com/pgimageai/pgimageai/bridge/backfill"
	"github.com/pgimageai/pgimageai/bridge/cost"
	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/bridge/work"
)

// Who does a result: the call of a decision (a row change's) or of a row
// read from the source (a backfill page's, a retry's, a parked row's). The
// Caller asks cost first (calls.Caller.Start).

// results makes the result items and starts their calls.
type results struct {
	*base
	calls Caller
	memo  promptMemo // last prompt per rule and row, for prompt templates
}

// decided returns the result item of decision d for rule r and row, its
// call started; ok is false when d calls for nothing.
func (x *results) decided(ctx context.Context, r *rules.Rule, row work.Row, d decision, look *cost.Lookup) (it work.Item, ok bool, err error) {
	if d.remember {
		x.memo.set(r.Name, row.JSON, d.prompt)
	}
	it = work.Item{Kind: work.Result, Rule: r.Ref(), Dest: work.Dest{Target: r.Target, SourceTable: r.Source.String()}, Row: row}
	switch d.act {
	case actNull:
		// NULL image: NULL result, no call.
	case actCall:
		if it.Call, err = x.calls.Start(ctx, r, look, d.image, d.prompt, false); err != nil {
			return work.Item{}, false, err
		}
	case actTooLarge:
		// Not read: a too_large errors row, with the length and head.
		it.Call = work.Failed(r.Fn.TooLarge(d.over.size, d.over.head), d.over.size, d.over.head)
	default:
		return work.Item{}, false, nil
	}
	return it, true, nil
}

// resultItem starts the function call of a row read from the source.
// fresh: see calls.Caller.Start; replay: the row was parked (see
// calls.Caller.Replay).
func (x *results) resultItem(ctx context.Context, r *rules.Rule, row backfill.Row, fresh, replay bool) (work.Item, error) {
	it := work.Item{Kind: work.Result, Rule: r.Ref(), Dest: work.Dest{Target: r.Target, SourceTable: r.Source.String()}, Row: work.Row{Key: row.Key, JSON: row.KeyJSON}}
	if r.Template != nil {
		x.memo.set(r.Name, row.KeyJSON, row.Prompt)
	}
	switch {
	case row.Over:
		// Not fetched: a too_large errors row, with the length and head.
		it.Call = work.Failed(r.Fn.TooLarge(row.Size, row.Head), row.Size, row.Head)
	case row.Valid:
		var err error
		var look *cost.Lookup
		if !row.Unstored && !x.lanes.Rows().Busy(r.Target.Name(), row.KeyJSON) {
			look = &cost.Lookup{KeyJSON: row.KeyJSON, Key: row.Key}
		}
		if it.Call = x.calls.Answered(r, row.Img, row.Prompt, row.Answer, look); it.Call != nil { // a batch answer
			break
		}
		if replay {
			it.Call, err = x.calls.Replay(ctx, r, look, row.Img, row.Prompt)
		} else {
			it.Call, err = x.calls.Start(ctx, r, look, row.Img, row.Prompt, fresh)
		}
		if err != nil {
			return work.Item{}, err
		}
	}
	return it, nil
}
