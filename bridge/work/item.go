package work

import (
	"github.com/pgimageai/pgimageai/bridge/track"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

// Kind is what an item does to the target.
type Kind uint8

const (
	Result     Kind = iota + 1 // write a function result (or NULL) for a row
	Move                       // re-key a target row
	Delete                     // delete a target row
	Truncate                   // empty a target table
	Backfill                   // record a backfill page's progress
	Resolve                    // resolve a row's open errors (its source row is gone)
	Forget                     // write-back: forget a deleted row's stored inputs and open errors (or the table's: a truncate)
	Switch                     // switch a rule's live column to its new version (Ops), in a transaction of its own
	DropShadow                 // drop given-up side work: a shadow column and its rows (Ops)
	Unpark                     // forget a parked row whose source row is gone (a replay found none)
)

func (k Kind) String() string {
	switch k {
	case Result:
		return "result"
	case Move:
		return "move"
	case Delete:
		return "delete"
	case Truncate:
		return "truncate"
	case Backfill:
		return "backfill"
	case Resolve:
		return "resolve"
	case Forget:
		return "forget"
	case Switch:
		return "switch"
	case DropShadow:
		return "drop_shadow"
	case Unpark:
		return "unpark"
	}
	return "invalid"
}

// Row is a source row's primary key, as values and as source_key JSON.
type Row struct {
	Key  []any
	JSON []byte
}

// Dest is where an item goes: a target table (its lane), the rules that
// write it (whose errors a delete resolves) and the source table.
type Dest struct {
	Target      *sink.Target
	Rules       []string
	SourceTable string
}

// Rule is what an item and its call carry of the rule that made them
// (rules.Rule.Ref): the names its lane writes in the bookkeeping, what
// tells whether the rule still runs as compiled, and what its call key is
// made of.
type Rule struct {
	Name        string // rules.name (a side rule's own)
	Model       string // models.name
	ModelKey    string // the model row as loaded (rules.Identity.ModelKey)
	Fingerprint string // what the rule computes, as compiled
	Version     string // the version it computes
	Fn          functions.Name
	Input       string // the function's input version (functions.Function.InputVersion)
}

// Ref returns r: a Rule is Ruled.
func (r *Rule) Ref() *Rule { return r }

// Ruled is what names its rule: a *Rule, or a compiled rules.Rule.
type Ruled interface{ Ref() *Rule }

// Item is one effect of a source change on one target table (a lane), at a
// position of the stream. The engine makes it; its lane writes it.
type Item struct {
	Kind     Kind
	Rule     *Rule // Result, Backfill, Resolve, Unpark, Switch
	Dest     Dest
	Row      Row // the row's (new) key
	Old      Row // Move: the old key
	LSN      replication.LSN
	Call     *Call                  // Result with a provider call; nil = a NULL image
	Waits    []*Call                // Move: the calls it must not be written before
	Progress state.BackfillProgress // Backfill
	Ops      []sink.Op              // Switch, DropShadow: the statements, with their bookkeeping; Truncate: bookkeeping written with it
	// Replay: a parked row sent again (after its model came back, or as
	// its probe); parked again, it keeps its place in the order of arrival.
	Replay bool

	Place
}

// Place is where an item stands once emitted: its position, transaction
// and what the byte budget holds for it.
type Place struct {
	Pos  state.Position // where in the stream; a lane's checkpoint after writing it
	Txn  *track.Txn     // its source transaction, for confirming the slot
	Cost int64          // budget bytes held until the item is written
}

// Ready reports whether the item's call (if any) has finished.
func (it *Item) Ready() bool { return it.NotReady() == nil }

// NotReady returns a call the item waits for, or nil when it is ready.
func (it *Item) NotReady() *Call {
	if it.Call != nil && !it.Call.Ready() {
		return it.Call
	}
	for _, c := range it.Waits {
		if !c.Ready() {
			return c
		}
	}
	return nil
}

// Rows returns the rows an item touches: its key (and old key), or every
// row (AllRows) for a truncate; none for bookkeeping items.
func (it *Item) Rows() [][]byte {
	switch it.Kind {
	case Result, Delete:
		return [][]byte{it.Row.JSON}
	case Move:
		return [][]byte{it.Row.JSON, it.Old.JSON}
	case Truncate:
		return [][]byte{[]byte(AllRows)}
	}
	return nil
}

// AllRows stands for every row of a lane (a truncate).
const AllRows = "*"
