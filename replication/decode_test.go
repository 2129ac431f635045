package replication

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"time"
)

var commitTime = time.Date(2025, 3, 1, 12, 30, 45, 123456000, time.UTC)

// TestFixturesAreByteExact pins the fixture builders to hand-written bytes of
// the documented layouts, so the other tests decode what the server sends.
func TestFixturesAreByteExact(t *testing.T) {
	tests := []struct {
		name string
		got  []byte
		want []byte
	}{
		{"begin", beginMsg(0x0000000100000A28, pgEpoch.Add(time.Second), 740),
			[]byte{'B', 0, 0, 0, 1, 0, 0, 0x0A, 0x28, 0, 0, 0, 0, 0, 0x0F, 0x42, 0x40, 0, 0, 0x02, 0xE4}},
		{"commit", commitMsg(0x10, 0x38, pgEpoch),
			[]byte{'C', 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0x38, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"relation", relationMsg(16385, "s", "t", 'd', relCol{key: true, name: "id", typ: 23, typmod: -1}),
			[]byte{'R', 0, 0, 0x40, 0x01, 's', 0, 't', 0, 'd', 0, 1, 1, 'i', 'd', 0, 0, 0, 0, 23, 0xFF, 0xFF, 0xFF, 0xFF}},
		{"insert", insertMsg(16385, col{'b', []byte{0, 0, 0, 42}}, col{'n', nil}, col{'u', nil}, col{'t', []byte("hi")}),
			[]byte{'I', 0, 0, 0x40, 0x01, 'N', 0, 4, 'b', 0, 0, 0, 4, 0, 0, 0, 42, 'n', 'u', 't', 0, 0, 0, 2, 'h', 'i'}},
		{"update key", updateMsg(1, 'K', []col{{'b', []byte{7}}}, []col{{'n', nil}}),
			[]byte{'U', 0, 0, 0, 1, 'K', 0, 1, 'b', 0, 0, 0, 1, 7, 'N', 0, 1, 'n'}},
		{"delete", deleteMsg(1, 'O', col{'t', []byte("x")}),
			[]byte{'D', 0, 0, 0, 1, 'O', 0, 1, 't', 0, 0, 0, 1, 'x'}},
		{"truncate", truncateMsg(3, 1, 2),
			[]byte{'T', 0, 0, 0, 2, 3, 0, 0, 0, 1, 0, 0, 0, 2}},
		{"message", logicalMsg(true, 0x20, "p", []byte("c")),
			[]byte{'M', 1, 0, 0, 0, 0, 0, 0, 0, 0x20, 'p', 0, 0, 0, 0, 1, 'c'}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !bytes.Equal(tt.got, tt.want) {
				t.Errorf("got  % x\nwant % x", tt.got, tt.want)
			}
		})
	}
}

func mustDecode(t testing.TB, d *decoder, lsn LSN, data []byte) Event {
	t.Helper()
	ev, err := d.decode(lsn, data)
	if err != nil {
		t.Fatalf("decode %q: %v", data[0], err)
	}
	return ev
}

func TestDecodeTransaction(t *testing.T) {
	d := newDecoder()
	if ev := mustDecode(t, d, 0, photosRel(16385)); ev != nil {
		t.Fatalf("Relation gave event %#v", ev)
	}
	rel := d.relations[16385]
	want := &Relation{OID: 16385, Namespace: "public", Name: "photos", ReplicaIdentity: 'd', Columns: []Column{
		{Name: "id", TypeOID: 23, TypeModifier: -1, Key: true},
		{Name: "img", TypeOID: 17, TypeModifier: -1},
		{Name: "note", TypeOID: 25, TypeModifier: -1},
	}}
	if !reflect.DeepEqual(rel, want) {
		t.Fatalf("relation = %#v, want %#v", rel, want)
	}

	png := []byte{0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0xFF}
	tests := []struct {
		name string
		lsn  LSN
		data []byte
		want Event
	}{
		{"begin", 0x100, beginMsg(0x200, commitTime, 740),
			Begin{XID: 740, FinalLSN: 0x200, CommitTime: commitTime}},
		{"insert every kind", 0x110, insertMsg(16385, col{'b', int4(1)}, col{'b', png}, col{'n', nil}),
			&Change{Op: Insert, LSN: 0x110, Relation: rel, New: Tuple{{Binary, int4(1)}, {Binary, png}, {Kind: Null}}}},
		{"insert empty image", 0x114, insertMsg(16385, col{'b', int4(3)}, col{'b', []byte{}}, col{'n', nil}),
			&Change{Op: Insert, LSN: 0x114, Relation: rel, New: Tuple{{Binary, int4(3)}, {Binary, []byte{}}, {Kind: Null}}}},
		{"insert text", 0x118, insertMsg(16385, col{'t', []byte("2")}, col{'t', []byte(`\x00ff`)}, col{'t', []byte{}}),
			&Change{Op: Insert, LSN: 0x118, Relation: rel, New: Tuple{{Text, []byte("2")}, {Text, []byte(`\x00ff`)}, {Text, []byte{}}}}},
		{"update unchanged toast, no old", 0x120, updateMsg(16385, 0, nil, []col{{'b', int4(1)}, {'u', nil}, {'t', []byte("n")}}),
			&Change{Op: Update, LSN: 0x120, Relation: rel, New: Tuple{{Binary, int4(1)}, {Kind: Unchanged}, {Text, []byte("n")}}}},
		{"update key change", 0x130, updateMsg(16385, 'K', []col{{'b', int4(1)}, {'n', nil}, {'n', nil}}, []col{{'b', int4(2)}, {'u', nil}, {'n', nil}}),
			&Change{Op: Update, LSN: 0x130, Relation: rel,
				Old: Tuple{{Binary, int4(1)}, {Kind: Null}, {Kind: Null}},
				New: Tuple{{Binary, int4(2)}, {Kind: Unchanged}, {Kind: Null}}}},
		{"update old full", 0x138, updateMsg(16385, 'O', []col{{'b', int4(2)}, {'b', png}, {'n', nil}}, []col{{'b', int4(2)}, {'b', png}, {'t', []byte("x")}}),
			&Change{Op: Update, LSN: 0x138, Relation: rel,
				Old: Tuple{{Binary, int4(2)}, {Binary, png}, {Kind: Null}},
				New: Tuple{{Binary, int4(2)}, {Binary, png}, {Text, []byte("x")}}}},
		{"delete key", 0x140, deleteMsg(16385, 'K', col{'b', int4(2)}, col{'n', nil}, col{'n', nil}),
			&Change{Op: Delete, LSN: 0x140, Relation: rel, Old: Tuple{{Binary, int4(2)}, {Kind: Null}, {Kind: Null}}}},
		{"message", 0x148, logicalMsg(true, 0x148, "pgimageai", []byte("hello")),
			&Message{LSN: 0x148, Transactional: true, Prefix: "pgimageai", Content: []byte("hello")}},
		{"truncate", 0x150, truncateMsg(1|2, 16385),
			&Change{Op: Truncate, LSN: 0x150, Truncated: []*Relation{rel}, Cascade: true, Restart: true}},
		{"truncate plain", 0x158, truncateMsg(0, 16385, 16385),
			&Change{Op: Truncate, LSN: 0x158, Truncated: []*Relation{rel, rel}}},
		{"type", 0x15c, typeMsg(90000, "public", "mood"), nil},
		{"origin", 0x15e, originMsg(0x99, "elsewhere"), nil},
		{"commit carries the begin's xid", 0x160, commitMsg(0x200, 0x228, commitTime),
			Commit{XID: 740, CommitLSN: 0x200, EndLSN: 0x228, CommitTime: commitTime}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustDecode(t, d, tt.lsn, tt.data)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %#v\nwant %#v", got, tt.want)
			}
			if c, ok := got.(*Change); ok && c.Relation != nil && c.Relation != rel {
				t.Error("Change.Relation is not the cached *Relation")
			}
		})
	}
}

func TestDecodeRelationReplaced(t *testing.T) {
	d := newDecoder()
	mustDecode(t, d, 0, photosRel(7))
	first := mustDecode(t, d, 0, insertMsg(7, col{'b', int4(1)}, col{'n', nil}, col{'n', nil})).(*Change)
	mustDecode(t, d, 0, relationMsg(7, "public", "photos", 'f', relCol{key: true, name: "id", typ: 23}, relCol{name: "img", typ: 17}))
	second := mustDecode(t, d, 0, insertMsg(7, col{'b', int4(1)}, col{'n', nil})).(*Change)
	if first.Relation == second.Relation {
		t.Fatal("a new Relation message must give a new *Relation")
	}
	if len(first.Relation.Columns) != 3 || first.Relation.ReplicaIdentity != 'd' {
		t.Errorf("emitted relation changed: %#v", first.Relation)
	}
	if len(second.Relation.Columns) != 2 || second.Relation.ReplicaIdentity != 'f' {
		t.Errorf("new relation = %#v", second.Relation)
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"unknown type", []byte{'Z', 0, 0}},
		{"stream start (streaming is off)", wireBuf{'S'}.u32(1).u8(1)},
		{"short begin", beginMsg(1, commitTime, 1)[:20]},
		{"short commit", commitMsg(1, 2, commitTime)[:25]},
		{"trailing bytes", append(beginMsg(1, commitTime, 1), 0)},
		{"insert unknown relation", insertMsg(99, col{'b', int4(1)})},
		{"update unknown relation", updateMsg(99, 0, nil, []col{{'n', nil}})},
		{"delete unknown relation", deleteMsg(99, 'K', col{'n', nil})},
		{"truncate unknown relation", truncateMsg(0, 16385, 99)},
		{"insert column count", insertMsg(16385, col{'b', int4(1)})},
		{"update old column count", updateMsg(16385, 'K', []col{{'n', nil}}, []col{{'n', nil}, {'n', nil}, {'n', nil}})},
		{"bad tuple kind", insertMsg(16385, col{'x', nil}, col{'n', nil}, col{'n', nil})},
		{"insert without N", wireBuf{'I'}.u32(16385).u8('K').tuple(col{'n', nil})},
		{"update old without N", wireBuf{'U'}.u32(16385).u8('K').tuple(col{'n', nil}, col{'n', nil}, col{'n', nil}).u8('X').tuple(col{'n', nil}, col{'n', nil}, col{'n', nil})},
		{"update bad tuple type", wireBuf{'U'}.u32(16385).u8('Q')},
		{"delete bad tuple type", wireBuf{'D'}.u32(16385).u8('N').tuple(col{'n', nil})},
		{"delete without tuple", wireBuf{'D'}.u32(16385)},
		{"column longer than message", wireBuf{'I'}.u32(16385).u8('N').u16(1).u8('b').u32(0xFFFFFFFF)},
		{"truncate count past end", wireBuf{'T'}.u32(0xFFFFFFFF).u8(0)},
		{"relation unterminated name", wireBuf{'R'}.u32(1).str("public").raw([]byte("photos"))},
		{"relation column count past end", wireBuf{'R'}.u32(1).str("s").str("t").u8('d').u16(3)},
		{"message content past end", wireBuf{'M'}.u8(0).u64(1).str("p").u32(10).raw([]byte("abc"))},
		{"message prefix unterminated", wireBuf{'M'}.u8(0).u64(1).raw([]byte("pfx"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDecoder()
			mustDecode(t, d, 0, photosRel(16385))
			ev, err := d.decode(1, tt.data)
			if err == nil {
				t.Fatalf("no error; event %#v", ev)
			}
			if !errors.Is(err, ErrProtocol) {
				t.Errorf("error %v does not wrap ErrProtocol", err)
			}
			if ev != nil {
				t.Errorf("event %#v with error", ev)
			}
		})
	}
}

// TestDecodeDoesNotAlias checks that events own their bytes: the caller's
// buffer (pgconn's read buffer in production) is overwritten after decode.
func TestDecodeDoesNotAlias(t *testing.T) {
	d := newDecoder()
	mustDecode(t, d, 0, photosRel(16385))
	img := bytes.Repeat([]byte{0xAB}, 64)

	ins := insertMsg(16385, col{'b', int4(5)}, col{'b', img}, col{'t', []byte("note")})
	msg := logicalMsg(false, 9, "p", []byte("content"))
	c := mustDecode(t, d, 1, ins).(*Change)
	m := mustDecode(t, d, 2, msg).(*Message)
	for i := range ins {
		ins[i] = 0
	}
	for i := range msg {
		msg[i] = 0
	}
	if !bytes.Equal(c.New[1].Data, img) || !bytes.Equal(c.New[2].Data, []byte("note")) || !bytes.Equal(c.New[0].Data, int4(5)) {
		t.Errorf("tuple aliases the input: %v", c.New)
	}
	if string(m.Content) != "content" || m.Prefix != "p" {
		t.Errorf("message aliases the input: %q %q", m.Prefix, m.Content)
	}
	if c.Size() != 4+64+4 {
		t.Errorf("Size = %d", c.Size())
	}
}

// TestDecodeTupleBoundedByBytes: a row change that names as many columns as
// a wide relation but carries none is refused before its tuple is made:
// what a message makes the decoder allocate is bounded by its bytes.
func TestDecodeTupleBoundedByBytes(t *testing.T) {
	cols := make([]relCol, 1600) // PostgreSQL's most columns in a table
	for i := range cols {
		cols[i] = relCol{key: i == 0, name: fmt.Sprintf("c%d", i), typ: 23, typmod: -1}
	}
	d := newDecoder()
	mustDecode(t, d, 0, relationMsg(7, "public", "wide", 'd', cols...))
	msg := wireBuf{'I'}.u32(7).u8('N').u16(1600)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 100 {
		if _, err := d.decode(0, msg); err == nil || !errors.Is(err, ErrProtocol) {
			t.Fatalf("decode = %v, want a protocol error", err)
		}
	}
	runtime.ReadMemStats(&after)
	// A Tuple of 1,600 values is 51 KB: 100 of them would be 5 MB.
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Fatalf("100 decodes of a %d-byte message allocated %d bytes", len(msg), n)
	}
}
