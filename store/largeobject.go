package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// Querier is the caller's connection or transaction (pgx.Conn, pgx.Tx,
// pgxpool.Pool): large objects are read on it, in its transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ReadLargeObject reads the large object oid with lo_get in bounded pieces,
// never more than maxBytes+1 bytes of it: an object larger than maxBytes is a
// too_large *Error, a missing one image_not_found, one the role may not read
// image_forbidden.
func ReadLargeObject(ctx context.Context, q Querier, oid uint32, maxBytes int64) ([]byte, error) {
	return nil, errors.New("store: ReadLargeObject: not implemented yet")
}
