package replication

import (
	"fmt"

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
// Nothing in the Event aliases data: pglogrepl copies tuple columns into new
// slices, strings are copies, and message content is copied here, so the
// caller may reuse data (pgconn's read buffer) as soon as decode returns;
// TestDecodeDoesNotAlias guards this. Errors wrap ErrProtocol.
func (d *decoder) decode(lsn LSN, data []byte) (Event, error) {
	msg, err := parse(data)
	if err != nil {
		return nil, err
	}
	switch m := msg.(type) {
	case *pglogrepl.BeginMessage:
		d.xid = m.Xid
		return Begin{XID: m.Xid, FinalLSN: m.FinalLSN, CommitTime: m.CommitTime.UTC()}, nil
	case *pglogrepl.CommitMessage:
		return Commit{XID: d.xid, CommitLSN: m.CommitLSN, EndLSN: m.TransactionEndLSN, CommitTime: m.CommitTime.UTC()}, nil
	case *pglogrepl.RelationMessage:
		d.relation(m)
		return nil, nil
	case *pglogrepl.TypeMessage, *pglogrepl.OriginMessage:
		return nil, nil
	case *pglogrepl.InsertMessage:
		return d.change(Insert, lsn, m.RelationID, 0, nil, m.Tuple)
	case *pglogrepl.UpdateMessage:
		return d.change(Update, lsn, m.RelationID, m.OldTupleType, m.OldTuple, m.NewTuple)
	case *pglogrepl.DeleteMessage:
		return d.change(Delete, lsn, m.RelationID, m.OldTupleType, m.OldTuple, nil)
	case *pglogrepl.TruncateMessage:
		return d.truncate(lsn, m)
	case *pglogrepl.LogicalDecodingMessage:
		return &Message{
			LSN:           m.LSN,
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

func (d *decoder) change(op Op, lsn LSN, oid uint32, oldType uint8, oldT, newT *pglogrepl.TupleData) (Event, error) {
	rel, err := d.lookup(op, oid)
	if err != nil {
		return nil, err
	}
	c := &Change{Op: op, LSN: lsn, Relation: rel}
	if oldType != 0 {
		if c.Old, err = tuple(rel, oldT); err != nil {
			return nil, fmt.Errorf("%s %s old tuple: %w", op, rel.Identifier().Sanitize(), err)
		}
	}
	if newT != nil {
		if c.New, err = tuple(rel, newT); err != nil {
			return nil, fmt.Errorf("%s %s new tuple: %w", op, rel.Identifier().Sanitize(), err)
		}
	}
	return c, nil
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

// tuple converts TupleData of rel into a Tuple in rel.Columns order.
func tuple(rel *Relation, td *pglogrepl.TupleData) (Tuple, error) {
	if td == nil {
		return nil, fmt.Errorf("%w: missing tuple", ErrProtocol)
	}
	if len(td.Columns) != len(rel.Columns) {
		return nil, fmt.Errorf("%w: tuple has %d columns, relation has %d", ErrProtocol, len(td.Columns), len(rel.Columns))
	}
	t := make(Tuple, len(td.Columns))
	for i, col := range td.Columns {
		switch col.DataType {
		case pglogrepl.TupleDataTypeNull:
			t[i] = Value{Kind: Null}
		case pglogrepl.TupleDataTypeToast:
			t[i] = Value{Kind: Unchanged}
		case pglogrepl.TupleDataTypeText:
			t[i] = Value{Kind: Text, Data: col.Data}
		case pglogrepl.TupleDataTypeBinary:
			t[i] = Value{Kind: Binary, Data: col.Data}
		default:
			return nil, fmt.Errorf("%w: column %q has kind %q", ErrProtocol, rel.Columns[i].Name, col.DataType)
		}
	}
	return t, nil
}
