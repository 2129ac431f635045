package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/internal/pgerr"
)

// Querier is the caller's connection or transaction (pgx.Conn, pgx.Tx,
// pgxpool.Pool): large objects are read on it, in its transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// LargeObjectPiece is the size of one lo_get: large enough that a 4 MB image
// is 5 round trips, small enough that no answer is large.
const LargeObjectPiece = 1 << 20

// ReadLargeObject reads the large object oid with lo_get(oid, offset, n) in
// pieces of at most LargeObjectPiece bytes, never more than maxBytes+1 bytes
// in all (a maxBytes ≤ 0 is DefaultMaxBytes): an object larger than maxBytes
// is a too_large *Error, a missing one image_not_found, one the role may not
// read image_forbidden; a connection failure is transient. Other errors of
// the caller's connection are returned as they are. Read inside a
// REPEATABLE READ transaction, the pieces are of one version of the object.
func ReadLargeObject(ctx context.Context, q Querier, oid uint32, maxBytes int64) ([]byte, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	var out []byte
	for {
		want := min(int64(LargeObjectPiece), maxBytes+1-int64(len(out)))
		var piece []byte
		err := q.QueryRow(ctx, "SELECT pg_catalog.lo_get($1::pg_catalog.oid, $2::pg_catalog.int8, $3::pg_catalog.int4)",
			oid, int64(len(out)), int32(want)).Scan(&piece)
		if err != nil {
			return nil, largeObjectError(oid, err)
		}
		if out == nil && int64(len(piece)) < want {
			return piece, nil // the whole object in one piece: no copy
		}
		out = append(out, piece...)
		if int64(len(out)) > maxBytes {
			return nil, &Error{Reason: ReasonTooLarge, Err: fmt.Errorf("large object %d is larger than the bound of %d bytes", oid, maxBytes)}
		}
		if int64(len(piece)) < want {
			return out, nil
		}
	}
}

func largeObjectError(oid uint32, err error) error {
	switch pgerr.SQLState(err) {
	case "42704": // undefined_object: "large object N does not exist"
		return &Error{Reason: ReasonNotFound, Err: fmt.Errorf("large object %d: %w", oid, err)}
	case "42501": // insufficient_privilege
		return &Error{Reason: ReasonForbidden, Err: fmt.Errorf("large object %d: %w", oid, err)}
	}
	if pgerr.Transient(err) {
		return transient(fmt.Errorf("large object %d: %w", oid, err))
	}
	return err
}
