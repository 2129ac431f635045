package replication

import (
	"testing"
)

// BenchmarkDecodeInsert8KiB decodes the Insert of a row with an 8 KB image,
// the fast-path benchmark's row: the copy of its columns out of the message.
func BenchmarkDecodeInsert8KiB(b *testing.B) {
	d := newDecoder()
	if _, err := d.decode(0, photosRel(7)); err != nil {
		b.Fatal(err)
	}
	msg := insertMsg(7, col{kind: 'b', data: int4(1)}, col{kind: 'b', data: make([]byte, 8200)}, col{kind: 'n'})
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.decode(0, msg); err != nil {
			b.Fatal(err)
		}
	}
}
