package replication

import (
	"errors"
	"testing"
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
