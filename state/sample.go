package state

import (
	"context"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"
)

// ImageSample bounds SampleImageHeads: a table of up to ExactRows rows (by
// pg_class's estimate) is read whole; a bigger one is sampled (TABLESAMPLE
// SYSTEM) for about SampleRows images. Only the first HeadBytes of each image
// are read.
type ImageSample struct {
	ExactRows  float64
	SampleRows int
	HeadBytes  int
}

// SampleImageHeads passes the first bytes of column's images of table (OID
// oid) and their whole length to each (nil and 0 for a NULL image), and
// returns the table's rows: exact when it was read whole, pg_class's
// estimate when sampled.
func SampleImageHeads(ctx context.Context, conn *pgx.Conn, oid uint32, table pgx.Identifier, column string, b ImageSample,
	each func(head []byte, length int64) error) (rows int64, sampled bool, err error) {
	var estimated float64
	if err := conn.QueryRow(ctx, "SELECT reltuples FROM pg_class WHERE oid = $1", oid).Scan(&estimated); err != nil {
		return 0, false, err
	}
	name := table.Sanitize()
	col := pgx.Identifier{column}.Sanitize()
	sql := fmt.Sprintf("SELECT substring(%[1]s FROM 1 FOR %[2]d), coalesce(octet_length(%[1]s), 0) FROM %[3]s", col, b.HeadBytes, name)
	if estimated > b.ExactRows {
		sampled, rows = true, int64(estimated)
		pct := math.Min(100, 100*float64(b.SampleRows)/estimated*1.2)
		sql = fmt.Sprintf("SELECT substring(%[1]s FROM 1 FOR %[2]d), coalesce(octet_length(%[1]s), 0) FROM %[3]s TABLESAMPLE SYSTEM (%[4]g) LIMIT %[5]d", col, b.HeadBytes, name, pct, b.SampleRows)
	} else if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+name).Scan(&rows); err != nil {
		return 0, false, err
	}
	q, err := conn.Query(ctx, sql)
	if err != nil {
		return 0, false, err
	}
	var head []byte
	var length int64
	_, err = pgx.ForEachRow(q, []any{&head, &length}, func() error { return each(head, length) })
	return rows, sampled, err
}
