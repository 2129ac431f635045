package replication

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/value"
)

// LSN is a WAL position.
type LSN = value.LSN

// Op is the kind of a row change.
type Op uint8

// The row operations of pgoutput.
const (
	Insert Op = iota + 1
	Update
	Delete
	Truncate
)

// String returns the operation's SQL name.
func (o Op) String() string {
	switch o {
	case Insert:
		return "INSERT"
	case Update:
		return "UPDATE"
	case Delete:
		return "DELETE"
	case Truncate:
		return "TRUNCATE"
	}
	return "UNKNOWN"
}

// Column is one column of a Relation as pgoutput describes it.
type Column struct {
	Name         string
	TypeOID      uint32
	TypeModifier int32
	Key          bool // part of the replica identity (the primary key by default)
}

// Relation is a published table as last described by a pgoutput Relation
// message. Relations are immutable once emitted: a schema change produces a
// new *Relation.
type Relation struct {
	OID             uint32
	Namespace, Name string
	ReplicaIdentity byte // 'd' default (primary key), 'n' nothing, 'f' full, 'i' index
	Columns         []Column
}

// Identifier returns the relation's quoted name, e.g. "public"."photos".
func (r *Relation) Identifier() pgx.Identifier { return pgx.Identifier{r.Namespace, r.Name} }

// ColumnIndex returns the index of the column named name (exact case), or -1.
func (r *Relation) ColumnIndex(name string) int {
	for i, c := range r.Columns {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// Kind says how a column value arrived in a tuple.
type Kind uint8

// The tuple column kinds of pgoutput.
const (
	Null      Kind = iota + 1 // 'n': SQL NULL
	Unchanged                 // 'u': unchanged TOASTed value, not sent
	Text                      // 't': text format
	Binary                    // 'b': binary format (binary 'true')
)

// String returns the kind's name: "null", "unchanged", "text" or "binary".
func (k Kind) String() string {
	switch k {
	case Null:
		return "null"
	case Unchanged:
		return "unchanged"
	case Text:
		return "text"
	case Binary:
		return "binary"
	}
	return "unknown"
}

// Value is one column value of a tuple. Data is owned by the Value (copied out
// of the connection's buffer) and is nil for Null and Unchanged.
type Value struct {
	Kind Kind
	Data []byte
}

// Tuple holds a row's values in Relation.Columns order.
type Tuple []Value

// Change is one row change of a transaction.
type Change struct {
	Op       Op
	LSN      LSN       // WAL position of the message that carried the change
	Relation *Relation // the changed table; nil for Truncate
	// Old is the old row for Update and Delete: the replica identity columns
	// (other columns Null) or the full row for REPLICA IDENTITY FULL; nil on an
	// Update that did not change the key.
	Old Tuple
	// New is the new row for Insert and Update; unchanged TOASTed columns have
	// Kind Unchanged.
	New Tuple
	// Truncated lists the tables of a TRUNCATE (Op Truncate only).
	Truncated []*Relation
	Cascade   bool // TRUNCATE ... CASCADE
	Restart   bool // TRUNCATE ... RESTART IDENTITY
}

// Size is the number of tuple bytes the change holds in memory: what a byte
// budget accounts for.
func (c *Change) Size() int {
	n := 0
	for _, v := range c.Old {
		n += len(v.Data)
	}
	for _, v := range c.New {
		n += len(v.Data)
	}
	return n
}

// Event is what a Stream emits: Begin, *Change, *Message, Commit or Reset.
type Event interface{ event() }

// Begin starts a transaction; every *Change until the matching Commit belongs
// to it.
type Begin struct {
	XID        uint32
	FinalLSN   LSN // the LSN of the commit record
	CommitTime time.Time
}

// Commit ends a transaction. EndLSN is the position to confirm once its
// effects are durable; a restart resumes after it.
type Commit struct {
	XID        uint32
	CommitLSN  LSN
	EndLSN     LSN
	CommitTime time.Time
}

// Message is a logical decoding message (pg_logical_emit_message) that the
// publication's messages option lets through.
type Message struct {
	LSN           LSN
	Transactional bool
	Prefix        string
	Content       []byte
}

// Reset tells the consumer that the connection was lost in the middle of a
// transaction: discard the open transaction; the server sends it again, whole,
// after the reconnect. Transactions already committed are never emitted twice.
type Reset struct {
	Err error // why the connection was lost
}

func (Begin) event()    {}
func (*Change) event()  {}
func (*Message) event() {}
func (Commit) event()   {}
func (Reset) event()    {}

// ParseLSN parses PostgreSQL's XXX/XXX text form of an LSN.
func ParseLSN(s string) (LSN, error) { return value.ParseLSN(s) }
