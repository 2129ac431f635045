package pgread

import (
	"bytes"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// A frontend built by Buffer reads the same messages as pgproto3's own:
// rows smaller and larger than the buffer, split across its refills, and an
// empty value kept apart from NULL.
func TestBufferKeepsMessages(t *testing.T) {
	sizes := []int{5, 8200, Size - 3, 3 * Size, 0, 100_000}
	var wire []byte
	var want [][]byte
	for i, n := range sizes {
		v := bytes.Repeat([]byte{byte(i + 1)}, n)
		row := &pgproto3.DataRow{Values: [][]byte{v, nil}}
		var err error
		if wire, err = row.Encode(wire); err != nil {
			t.Fatal(err)
		}
		want = append(want, v)
	}
	wire, _ = (&pgproto3.ReadyForQuery{TxStatus: 'I'}).Encode(wire)

	var cfg pgconn.Config
	Buffer(&cfg)
	if cfg.BuildFrontend == nil {
		t.Fatal("Buffer set no BuildFrontend")
	}
	// A reader that returns at most 1,000 bytes per read, as a socket may.
	fe := cfg.BuildFrontend(&trickle{r: bytes.NewReader(wire), max: 1000}, io.Discard)
	for i, w := range want {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		row, ok := msg.(*pgproto3.DataRow)
		if !ok {
			t.Fatalf("row %d: got %T", i, msg)
		}
		if len(row.Values) != 2 || !bytes.Equal(row.Values[0], w) || row.Values[0] == nil || row.Values[1] != nil {
			t.Fatalf("row %d: %d values, first of %d bytes (want %d), second nil %v", i, len(row.Values), len(row.Values[0]), len(w), row.Values[1] == nil)
		}
	}
	if msg, err := fe.Receive(); err != nil {
		t.Fatal(err)
	} else if _, ok := msg.(*pgproto3.ReadyForQuery); !ok {
		t.Fatalf("last message %T, want ReadyForQuery", msg)
	}
}

type trickle struct {
	r   io.Reader
	max int
}

func (t *trickle) Read(p []byte) (int, error) { return t.r.Read(p[:min(len(p), t.max)]) }

// Thirty rows of an 8 KB image, all available at once, take a read or two
// of the connection through Buffer's frontend; pgproto3's own frontend
// makes one or two per row.
func TestBufferReadsInBulk(t *testing.T) {
	var wire []byte
	for range 30 {
		wire, _ = (&pgproto3.DataRow{Values: [][]byte{make([]byte, 8200)}}).Encode(wire)
	}
	count := func(build pgconn.BuildFrontendFunc) int {
		c := &counting{r: bytes.NewReader(wire)}
		fe := build(c, io.Discard)
		for i := range 30 {
			if _, err := fe.Receive(); err != nil {
				t.Fatalf("row %d: %v", i, err)
			}
		}
		return c.reads
	}
	var cfg pgconn.Config
	Buffer(&cfg)
	buffered, plain := count(cfg.BuildFrontend), count(pgproto3.NewFrontend)
	if buffered > 2 || plain < 30 {
		t.Fatalf("reads for 30 rows: %d through Buffer (want 2 at most), %d through pgproto3's own (want 30 or more)", buffered, plain)
	}
}

type counting struct {
	r     io.Reader
	reads int
}

func (c *counting) Read(p []byte) (int, error) { c.reads++; return c.r.Read(p) }
