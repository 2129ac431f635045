// Package pgread gives a PostgreSQL connection a large read buffer, for the
// connections that receive image bytes in bulk: the replication stream and
// a backfill's pages.
//
// pgproto3 reads into a buffer of its own of 8 KiB, so a message of an 8 KB
// image takes one or two read system calls of its own. Reading through a
// bufio.Reader of Size bytes, a backlog arrives in reads of up to Size, at
// the cost of one copy of each message in memory.
package pgread

import (
	"bufio"
	"io"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Size is the read buffer of a connection passed to Buffer.
const Size = 256 << 10

// Buffer makes connections of cfg read through a buffer of Size bytes.
func Buffer(cfg *pgconn.Config) {
	cfg.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
		return pgproto3.NewFrontend(bufio.NewReaderSize(r, Size), w)
	}
}
