// Package pgread gives a PostgreSQL connection a large read buffer, for the
// connections that receive image bytes in bulk: the replication stream and
// a backfill's pages.
//
// pgproto3 reads into a buffer of its own of 8 KiB, so a message of an 8 KB
// image takes one or two read system calls of its own. Reading through a
// bufio.Reader of Size bytes, a backlog arrives in reads of up to Size, at
// the cost of one copy of each message in memory. The buffer is Size bytes
// per connection, outside the byte budget (a replication connection and one
// per running backfill).
//
// pgconn does not see the bytes in that buffer: a connection built by Buffer
// must not be handed to SyncConn, Hijack or Conn(), which would lose them.
// Nothing in pgimageai does.
//
// Layer: toolkit.
package pgread

import (
	"bufio"
	"errors"
	"io"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Size is the read buffer of a connection passed to Buffer.
const Size = 256 << 10

// Buffer makes connections of cfg read through a buffer of Size bytes.
func Buffer(cfg *pgconn.Config) {
	cfg.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
		return pgproto3.NewFrontend(bufio.NewReaderSize(timeoutAfterData{r}, Size), w)
	}
}

// timeoutAfterData drops a timeout that comes with data. bufio would keep
// it and report it at the next read, after pgconn has cleared the deadline
// that caused it (a context's end during a read): a stream that goes on
// would then end with a stale timeout. Without data the timeout is
// reported, as pgconn expects; a deadline still set times out again.
type timeoutAfterData struct{ r io.Reader }

func (t timeoutAfterData) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	var ne net.Error
	if n > 0 && err != nil && errors.As(err, &ne) && ne.Timeout() {
		err = nil
	}
	return n, err
}
