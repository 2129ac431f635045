package replication

import (
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"
)

// decoder turns pgoutput messages into Events. It holds the state the
// protocol spreads over messages: the relation cache (a Relation message
// precedes the first change of a table on each connection and after each
// schema change) and the XID of the open transaction, which Commit lacks.
//
// A decoder belongs to one connection and one goroutine; a new connection
// starts with a new decoder, because the server re-sends Relation messages.
type decoder struct {
	relations map[uint32]*Relation
	xid       uint32
}

func newDecoder() *decoder {
	return &decoder{relations: make(map[uint32]*Relation)}
}

// decode decodes the pgoutput message data that the server sent at WAL
// position lsn (the XLogData's WALStart). A nil Event with a nil error means
// the message only updated decoder state (Relation, Type, Origin).
//
// Nothing in the Event aliases data: tuple columns are copied into new
// slices (rowChange), strings are copies, and message content is copied here, so the
// caller may reuse data (pgconn's read buffer) as soon as decode returns;
// TestDecodeDoesNotAlias guards this. Errors wrap ErrProtocol.
func (d *decoder) decode(lsn LSN, data []byte) (Event, error) {
	if len(data) > 0 && (data[0] == 'I' || data[0] == 'U' || data[0] == 'D') {
		return d.rowChange(lsn, data)
	}
	msg, err := parse(data)
	if err != nil {
		return nil, err
	}
	switch m := msg.(type) {
	case *pglogrepl.BeginMessage:
		d.xid = m.Xid
		return Begin{XID: m.Xid, FinalLSN: LSN(m.FinalLSN), CommitTime: m.CommitTime.UTC()}, nil
	case *pglogrepl.CommitMessage:
		return Commit{XID: d.xid, CommitLSN: LSN(m.CommitLSN), EndLSN: LSN(m.TransactionEndLSN), CommitTime: m.CommitTime.UTC()}, nil
	case *pglogrepl.RelationMessage:
		d.relation(m)
		return nil, nil
	case *pglogrepl.TypeMessage, *pglogrepl.OriginMessage:
		return nil, nil
	case *pglogrepl.TruncateMessage:
		return d.truncate(lsn, m)
	case *pglogrepl.LogicalDecodingMessage:
		return &Message{
			LSN:           LSN(m.LSN),
			Transactional: m.Transactional,
			Prefix:        m.Prefix,
			Content:       append([]byte(nil), m.Content...), // pglogrepl aliases its input here
		}, nil
	}
	return nil, fmt.Errorf("%w: unexpected message %s", ErrProtocol, msg.Type())
}

// relation replaces the cache entry of m's relation with a new *Relation, so
// that Relations already emitted never change.
func (d *decoder) relation(m *pglogrepl.RelationMessage) {
	rel := &Relation{
		OID:             m.RelationID,
		Namespace:       m.Namespace,
		Name:            m.RelationName,
		ReplicaIdentity: m.ReplicaIdentity,
		Columns:         make([]Column, len(m.Columns)),
	}
	for i, c := range m.Columns {
		rel.Columns[i] = Column{Name: c.Name, TypeOID: c.DataType, TypeModifier: c.TypeModifier, Key: c.Flags&1 != 0}
	}
	d.relations[m.RelationID] = rel
}

func (d *decoder) lookup(op Op, oid uint32) (*Relation, error) {
	rel, ok := d.relations[oid]
	if !ok {
		return nil, fmt.Errorf("%w: %s for relation OID %d before its Relation message", ErrProtocol, op, oid)
	}
	return rel, nil
}

func (d *decoder) truncate(lsn LSN, m *pglogrepl.TruncateMessage) (Event, error) {
	c := &Change{
		Op:        Truncate,
		LSN:       lsn,
		Truncated: make([]*Relation, len(m.RelationIDs)),
		Cascade:   m.Option&pglogrepl.TruncateOptionCascade != 0,
		Restart:   m.Option&pglogrepl.TruncateOptionRestartIdentity != 0,
	}
	for i, oid := range m.RelationIDs {
		rel, err := d.lookup(Truncate, oid)
		if err != nil {
			return nil, err
		}
		c.Truncated[i] = rel
	}
	return c, nil
}

// rowChange decodes an Insert, Update or Delete message straight into a
// Change: the most frequent messages, and the biggest (the images), so
// each column's bytes are copied once, with copy, into a slice of its own
// (an image outlives the rest of its tuple in the calls). It accepts what
// validate accepts, and gives what pglogrepl.Parse and the conversion of
// its TupleData gave (FuzzDecode compares the two), but for an Insert into
// a table of no columns, which pglogrepl refused as too short (no such
// table has the primary key a rule needs).
func (d *decoder) rowChange(lsn LSN, data []byte) (Event, error) {
	op := Insert
	switch data[0] {
	case 'U':
		op = Update
	case 'D':
		op = Delete
	}
	c := cursor{b: data[1:]}
	oid := c.uint32()
	if !c.ok() {
		return nil, fmt.Errorf("%w: malformed %q message: %s", ErrProtocol, data[0], c.err)
	}
	rel, err := d.lookup(op, oid)
	if err != nil {
		return nil, err
	}
	ch := &Change{Op: op, LSN: lsn, Relation: rel}
	switch kind := c.byte(); {
	case !c.ok():
	case op != Delete && kind == 'N': // an Insert, or an Update without its old row
		ch.New = c.values(rel)
	case op != Insert && (kind == 'K' || kind == 'O'):
		ch.Old = c.values(rel)
		if op == Update {
			c.expect('N')
			ch.New = c.values(rel)
		}
	case op == Insert:
		c.fail(fmt.Sprintf("expected 'N', got %q", kind))
	default:
		c.fail(fmt.Sprintf("%s tuple type %q", strings.ToLower(op.String()), kind))
	}
	if c.err != "" {
		return nil, fmt.Errorf("%w: malformed %q message of %s: %s", ErrProtocol, data[0], rel.Identifier().Sanitize(), c.err)
	}
	if len(c.b) != 0 {
		return nil, fmt.Errorf("%w: %q message has %d trailing bytes", ErrProtocol, data[0], len(c.b))
	}
	return ch, nil
}
