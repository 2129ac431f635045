package replication

import (
	"encoding/binary"
	"time"
)

// This file builds pgoutput protocol version 1 messages byte by byte, as the
// server sends them (XLogData payloads), for the decoder tests. Layouts:
// https://www.postgresql.org/docs/current/protocol-logicalrep-message-formats.html

// pgEpoch is the PostgreSQL timestamp epoch.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

type wireBuf []byte

func (w wireBuf) u8(v byte) wireBuf      { return append(w, v) }
func (w wireBuf) u16(v uint16) wireBuf   { return binary.BigEndian.AppendUint16(w, v) }
func (w wireBuf) u32(v uint32) wireBuf   { return binary.BigEndian.AppendUint32(w, v) }
func (w wireBuf) u64(v uint64) wireBuf   { return binary.BigEndian.AppendUint64(w, v) }
func (w wireBuf) str(s string) wireBuf   { return append(append(w, s...), 0) }
func (w wireBuf) raw(b []byte) wireBuf   { return append(w, b...) }
func (w wireBuf) ts(t time.Time) wireBuf { return w.u64(uint64(t.Sub(pgEpoch).Microseconds())) }

// col is one TupleData column: kind 'n', 'u', 't' or 'b' and, for 't' and
// 'b', its bytes.
type col struct {
	kind byte
	data []byte
}

func (w wireBuf) tuple(cols ...col) wireBuf {
	w = w.u16(uint16(len(cols)))
	for _, c := range cols {
		w = w.u8(c.kind)
		if c.kind == 't' || c.kind == 'b' {
			w = w.u32(uint32(len(c.data))).raw(c.data)
		}
	}
	return w
}

func beginMsg(final LSN, at time.Time, xid uint32) []byte {
	return wireBuf{'B'}.u64(uint64(final)).ts(at).u32(xid)
}

func commitMsg(commit, end LSN, at time.Time) []byte {
	return wireBuf{'C'}.u8(0).u64(uint64(commit)).u64(uint64(end)).ts(at)
}

// relCol is one column of a Relation message.
type relCol struct {
	key    bool
	name   string
	typ    uint32
	typmod int32
}

func relationMsg(oid uint32, ns, name string, ident byte, cols ...relCol) []byte {
	w := wireBuf{'R'}.u32(oid).str(ns).str(name).u8(ident).u16(uint16(len(cols)))
	for _, c := range cols {
		var flags byte
		if c.key {
			flags = 1
		}
		w = w.u8(flags).str(c.name).u32(c.typ).u32(uint32(c.typmod))
	}
	return w
}

func insertMsg(oid uint32, cols ...col) []byte {
	return wireBuf{'I'}.u32(oid).u8('N').tuple(cols...)
}

// updateMsg builds an Update; oldKind is 'K', 'O' or 0 for no old tuple.
func updateMsg(oid uint32, oldKind byte, old, new []col) []byte {
	w := wireBuf{'U'}.u32(oid)
	if oldKind != 0 {
		w = w.u8(oldKind).tuple(old...)
	}
	return w.u8('N').tuple(new...)
}

func deleteMsg(oid uint32, oldKind byte, old ...col) []byte {
	return wireBuf{'D'}.u32(oid).u8(oldKind).tuple(old...)
}

func truncateMsg(options byte, oids ...uint32) []byte {
	w := wireBuf{'T'}.u32(uint32(len(oids))).u8(options)
	for _, o := range oids {
		w = w.u32(o)
	}
	return w
}

func logicalMsg(transactional bool, lsn LSN, prefix string, content []byte) []byte {
	var flags byte
	if transactional {
		flags = 1
	}
	return wireBuf{'M'}.u8(flags).u64(uint64(lsn)).str(prefix).u32(uint32(len(content))).raw(content)
}

func typeMsg(oid uint32, ns, name string) []byte {
	return wireBuf{'Y'}.u32(oid).str(ns).str(name)
}

func originMsg(lsn LSN, name string) []byte {
	return wireBuf{'O'}.u64(uint64(lsn)).str(name)
}

// photos is the relation most tests use: public.photos(id int4 key, img bytea, note text).
func photosRel(oid uint32) []byte {
	return relationMsg(oid, "public", "photos", 'd',
		relCol{key: true, name: "id", typ: 23, typmod: -1},
		relCol{name: "img", typ: 17, typmod: -1},
		relCol{name: "note", typ: 25, typmod: -1},
	)
}

func int4(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
