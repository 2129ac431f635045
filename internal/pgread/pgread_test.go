package pgread

import (
	"bytes"
	"errors"
	"io"
	"net"
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

// A timeout in the middle of a message (a context that ended during a
// read) is reported once and loses nothing: the next Receive gives the whole
// message. A timeout that comes with data is not kept for a later read.
func TestBufferTimeoutMidMessage(t *testing.T) {
	var wire []byte
	for _, n := range []int{8200, 40} {
		wire, _ = (&pgproto3.DataRow{Values: [][]byte{bytes.Repeat([]byte{'x'}, n)}}).Encode(wire)
	}
	r := &scripted{steps: []step{
		{data: wire[:3000]},
		{err: timeout{}},                        // mid-message, no data
		{data: wire[3000:5000], err: timeout{}}, // data with a timeout
		{data: wire[5000:]},
	}}
	var cfg pgconn.Config
	Buffer(&cfg)
	fe := cfg.BuildFrontend(r, io.Discard)
	if _, err := fe.Receive(); !isTimeout(err) {
		t.Fatalf("first Receive: %v, want the timeout", err)
	}
	for i, n := range []int{8200, 40} {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatalf("row %d after the timeout: %v", i, err)
		}
		if row, ok := msg.(*pgproto3.DataRow); !ok || len(row.Values[0]) != n {
			t.Fatalf("row %d after the timeout: %T, want a row of %d bytes", i, msg, n)
		}
	}
}

type timeout struct{}

func (timeout) Error() string   { return "i/o timeout" }
func (timeout) Timeout() bool   { return true }
func (timeout) Temporary() bool { return true }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

type step struct {
	data []byte
	err  error
}

// scripted returns its steps' data and errors, one step per read.
type scripted struct{ steps []step }

func (s *scripted) Read(p []byte) (int, error) {
	if len(s.steps) == 0 {
		return 0, io.EOF
	}
	st := &s.steps[0]
	n := copy(p, st.data)
	st.data = st.data[n:]
	if len(st.data) > 0 {
		return n, nil
	}
	s.steps = s.steps[1:]
	return n, st.err
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
	if buffered := count(cfg.BuildFrontend); buffered > 2 {
		t.Fatalf("reads for 30 rows through Buffer: %d, want 2 at most", buffered)
	}
	t.Logf("reads for 30 rows through pgproto3's own buffer: %d", count(pgproto3.NewFrontend))
}

type counting struct {
	r     io.Reader
	reads int
}

func (c *counting) Read(p []byte) (int, error) { c.reads++; return c.r.Read(p) }
