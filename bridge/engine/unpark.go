package engine

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge/backfill"
	"github.com/pgimageai/pgimageai/bridge/park"
	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/state"
)

// unpark routes, at the position of the marker message m, the page of
// parked rows the Drainer asked for there: the source rows behind them as
// they are now, like a retry's — a row changed since it parked is sent as
// it is, which is at least as new as any change before the marker, and a
// change after the marker comes after it in its lane. A row gone since has
// its parked row deleted. The page is one rule's rows (the first rows after
// the page's seq that are of the same rule), in order of arrival.
func (x *rereads) unpark(ctx context.Context, m *replication.Message) error {
	p, ok := x.parked.Take(m.Content)
	if !ok {
		return nil // not a marker of this run's Drainer
	}
	var a park.Applied
	defer func() { p.Done(a) }()
	var names []string
	for name, model := range x.rules.set.RuleModels() {
		if model == p.Model {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	var page []state.ParkedRow
	err := x.conns.Retrying(ctx, x.log, "reading the parked rows", func(_, tgt *pgx.Conn) error {
		var err error
		page, err = state.ParkedPage(ctx, tgt, names, p.After, p.Limit)
		return err
	})
	if err != nil || len(page) == 0 {
		return err
	}
	n := 1
	for n < len(page) && page[n].Rule == page[0].Rule {
		n++
	}
	page = page[:n]
	r := x.rules.set.Named(page[0].Rule)
	lane := r.Target.Name()
	keys := make([]json.RawMessage, len(page))
	for i, row := range page {
		keys[i] = row.Key
	}
	list, _ := json.Marshal(keys)
	next := 0 // ordinal (from 1) of the next key to account for
	// gone deletes the parked rows of keys next+1.. up to ordinal upTo
	// (exclusive): their source rows are gone.
	gone := func(upTo int) error {
		for ; next+1 < upTo; next++ {
			if err := x.out.place(ctx, next, work.Item{Kind: work.Unpark, Rule: r.Ref(), Dest: work.Dest{Target: r.Target}, Row: work.Row{JSON: page[next].Key}}); err != nil {
				return err
			}
		}
		return nil
	}
	var after int64
	for {
		var rows []backfill.Row
		var total int
		err := x.conns.Retrying(ctx, x.log, "reading the parked rows' source rows", func(src, _ *pgx.Conn) error {
			var err error
			rows, total, err = backfill.ReadPage(ctx, src, r, backfill.ByKeysSQL(r), string(list), after)
			return err
		})
		if err != nil {
			return err
		}
		for _, row := range rows {
			if err := gone(int(row.Ord)); err != nil {
				return err
			}
			next = int(row.Ord)
			pos, ok := x.out.admit(lane, int(row.Ord)-1)
			if !ok {
				continue
			}
			it, err := x.res.resultItem(ctx, r, row, false, true)
			if err != nil {
				return err
			}
			it.LSN, it.Replay = m.LSN, true
			if err := x.out.emit(ctx, pos, it); err != nil {
				return err
			}
			if it.Call != nil {
				a.Calls = append(a.Calls, it.Call)
			}
		}
		if len(rows) == 0 || total < backfill.RetryRows && len(rows) == total {
			break
		}
		after = rows[len(rows)-1].Ord
	}
	if err := gone(len(page) + 1); err != nil {
		return err
	}
	a.Rows, a.Last = len(page), page[len(page)-1].Seq
	return nil
}
