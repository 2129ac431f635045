package replication

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pglogrepl"
)

// FuzzDecode feeds arbitrary bytes to the decoder, which must never panic
// and, when it succeeds, must give events consistent with their relation.
func FuzzDecode(f *testing.F) {
	seeds := [][]byte{
		beginMsg(0x200, commitTime, 740),
		commitMsg(0x200, 0x228, commitTime),
		photosRel(16385),
		relationMsg(16386, "Odd Schema", "My Table", 'f', relCol{key: true, name: "k", typ: 25, typmod: -1}),
		insertMsg(16385, col{'b', int4(1)}, col{'b', []byte{0x89, 'P', 'N', 'G'}}, col{'n', nil}),
		insertMsg(16385, col{'b', int4(1)}, col{'b', []byte{}}, col{'t', []byte{}}), // empty is not NULL
		updateMsg(16385, 'K', []col{{'b', int4(1)}, {'n', nil}, {'n', nil}}, []col{{'b', int4(2)}, {'u', nil}, {'t', []byte("x")}}),
		updateMsg(16385, 'O', []col{{'b', int4(1)}, {'n', nil}, {'n', nil}}, []col{{'b', int4(2)}, {'u', nil}, {'t', []byte("x")}}),
		updateMsg(16385, 0, nil, []col{{'b', int4(2)}, {'u', nil}, {'t', []byte("x")}}),
		deleteMsg(16385, 'K', col{'b', int4(1)}, col{'n', nil}, col{'n', nil}),
		truncateMsg(3, 16385),
		logicalMsg(false, 0x10, "p", []byte("content")),
		typeMsg(1, "s", "t"),
		originMsg(1, "o"),
		{},
		{'I'},
		{'U', 0, 0, 0x40, 0x01, 'K', 0xFF, 0xFF},
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := newDecoder()
		if _, err := d.decode(0, photosRel(16385)); err != nil {
			t.Fatal(err)
		}
		ev, err := d.decode(1, data)
		if len(data) > 0 && (data[0] == 'I' || data[0] == 'U' || data[0] == 'D') {
			ref, refErr := d.viaPglogrepl(1, data)
			if (err == nil) != (refErr == nil) {
				t.Fatalf("decode: %v; through pglogrepl: %v", err, refErr)
			}
			if err == nil && !sameChange(ev.(*Change), ref.(*Change)) {
				t.Fatalf("decode: %+v; through pglogrepl: %+v", ev, ref)
			}
		}
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v does not wrap ErrProtocol", err)
			}
			return
		}
		c, ok := ev.(*Change)
		if !ok || c.Op == Truncate {
			return
		}
		for _, tup := range []Tuple{c.Old, c.New} {
			if tup != nil && len(tup) != len(c.Relation.Columns) {
				t.Fatalf("tuple of %d values for %d columns", len(tup), len(c.Relation.Columns))
			}
			for _, v := range tup {
				if (v.Kind == Null || v.Kind == Unchanged) != (v.Data == nil) {
					t.Fatalf("value %v has data %v", v.Kind, v.Data)
				}
			}
		}
	})
}

// viaPglogrepl decodes a row change as the decoder did before rowChange:
// validate, pglogrepl.Parse, and a conversion of its TupleData. FuzzDecode
// holds rowChange to it.
func (d *decoder) viaPglogrepl(lsn LSN, data []byte) (Event, error) {
	msg, err := parse(data)
	if err != nil {
		return nil, err
	}
	switch m := msg.(type) {
	case *pglogrepl.InsertMessage:
		return d.refChange(Insert, lsn, m.RelationID, 0, nil, m.Tuple)
	case *pglogrepl.UpdateMessage:
		return d.refChange(Update, lsn, m.RelationID, m.OldTupleType, m.OldTuple, m.NewTuple)
	case *pglogrepl.DeleteMessage:
		return d.refChange(Delete, lsn, m.RelationID, m.OldTupleType, m.OldTuple, nil)
	}
	return nil, errors.New("not a row change")
}

func sameChange(a, b *Change) bool {
	sameTuple := func(x, y Tuple) bool {
		if (x == nil) != (y == nil) || len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i].Kind != y[i].Kind || !bytes.Equal(x[i].Data, y[i].Data) || (x[i].Data == nil) != (y[i].Data == nil) {
				return false
			}
		}
		return true
	}
	return a.Op == b.Op && a.LSN == b.LSN && a.Relation == b.Relation && sameTuple(a.Old, b.Old) && sameTuple(a.New, b.New)
}

func (d *decoder) refChange(op Op, lsn LSN, oid uint32, oldType uint8, oldT, newT *pglogrepl.TupleData) (Event, error) {
	rel, err := d.lookup(op, oid)
	if err != nil {
		return nil, err
	}
	c := &Change{Op: op, LSN: lsn, Relation: rel}
	if oldType != 0 {
		if c.Old, err = refTuple(rel, oldT); err != nil {
			return nil, fmt.Errorf("%s %s old tuple: %w", op, rel.Identifier().Sanitize(), err)
		}
	}
	if newT != nil {
		if c.New, err = refTuple(rel, newT); err != nil {
			return nil, fmt.Errorf("%s %s new tuple: %w", op, rel.Identifier().Sanitize(), err)
		}
	}
	return c, nil
}

// refTuple converts TupleData of rel into a Tuple in rel.Columns order.
func refTuple(rel *Relation, td *pglogrepl.TupleData) (Tuple, error) {
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
