package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/pgimageai/pgimageai/bridge/apply"
	"github.com/pgimageai/pgimageai/bridge/cost"
	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/bridge/track"
	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/state"
)

// Where an item goes: its position in the stream, its lane, and what the
// byte budget holds for it while it waits there.

// itemOverhead is what the byte budget charges for an item waiting in a lane
// on top of its key: results and deletes of a lane behind a slow model stay
// bounded by the budget like the images are.
const itemOverhead = 1 << 10

// eventBits is how many bits of a position's ordinal number the items of one
// event (a change or message): up to 16M items, the rows of a backfill page
// or a retry included.
const eventBits = 24

// openTxn is the source transaction being read, or the transaction of a
// backfill page's or retry's marker message.
type openTxn struct {
	final      replication.LSN // Begin.FinalLSN: the commit LSN
	commitTime time.Time
	rec        *track.Txn
	event      int64          // ordinal of the current change or message in the transaction
	config     []rules.Change // changes of rules and models, applied at commit
	own        bool           // the bridge's own write-back transaction: ignored
}

// router is where the engine stands in the stream — the transaction being
// read, the one a reconnect cut off, what each lane was routed, and the
// records that confirm the slot — and where it sends items.
type router struct {
	open    *openTxn
	resumed *openTxn                  // the transaction cut off by a Reset, sent again next
	routed  map[string]state.Position // per lane: the last position routed (or stored at start)
	tracker *track.Tracker
	own     *apply.Own // IDs of the bridge's own write-back transactions
	lanes   Lanes
	budget  *cost.Budget // nil: nothing is charged
}

func newRouter(r Resume, lanes Lanes, budget *cost.Budget) *router {
	out := &router{routed: r.Routed, tracker: r.Tracker, own: r.Own, lanes: lanes, budget: budget}
	if out.routed == nil {
		out.routed = map[string]state.Position{}
	}
	return out
}

// begin opens the transaction of ev.
func (o *router) begin(log *slog.Logger, ev replication.Begin) {
	if r := o.resumed; r != nil {
		o.resumed = nil
		if r.final == ev.FinalLSN {
			// The transaction cut off by the Reset, sent again: its
			// items routed before are skipped by position.
			o.open = &openTxn{final: r.final, commitTime: r.commitTime, rec: r.rec, own: r.own}
			return
		}
		log.Warn("the transaction cut off by a reconnect was not sent again", "commit_lsn", r.final.String(), "next", ev.FinalLSN.String())
		o.tracker.Abandon(r.rec)
	}
	o.open = &openTxn{final: ev.FinalLSN, commitTime: ev.CommitTime, rec: o.tracker.Begin(ev.CommitTime), own: o.own.Take(ev.XID)}
}

// reset keeps the open transaction, which the server sends again after the
// reconnect: what was routed of it stays, and is skipped when read again.
func (o *router) reset() {
	if o.open != nil {
		o.resumed, o.open = o.open, nil
	}
}

// position returns the position of item sub of the current event.
func (o *router) position(sub int) state.Position {
	return state.Position{Commit: o.open.final, Ord: o.open.event<<eventBits | int64(sub)}
}

// admit reports whether the item sub of the current event for lane must be
// made: false when the lane has it already (stored before a restart, or
// routed before a reconnect). It is asked before any call is started, so
// that what was written costs no new call.
func (o *router) admit(lane string, sub int) (state.Position, bool) {
	pos := o.position(sub)
	return pos, o.routed[lane].Less(pos)
}

// emit routes an item at pos to its lane. It charges the budget for the item
// while it waits there, which blocks the engine — and so the stream — when
// the lanes hold the whole budget.
func (o *router) emit(ctx context.Context, pos state.Position, it work.Item) error {
	lane := it.Dest.Target.Name()
	it.Pos, it.Txn = pos, o.open.rec
	it.Cost = itemOverhead + int64(len(it.Row.JSON)+len(it.Old.JSON))
	if it.Call != nil {
		it.Cost += it.Call.Held
	}
	if o.budget != nil {
		if err := o.budget.Acquire(ctx, it.Cost); err != nil {
			return err
		}
	}
	o.routed[lane] = pos
	o.tracker.Add(it.Txn)
	o.lanes.Push(it)
	return nil
}

// place emits it as item sub of the current event, unless its lane has it.
func (o *router) place(ctx context.Context, sub int, it work.Item) error {
	pos, ok := o.admit(it.Dest.Target.Name(), sub)
	if !ok {
		return nil
	}
	return o.emit(ctx, pos, it)
}
