package state

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrorCap is a rule whose failures were not all recorded: the rule was at
// its cap of open errors rows (pgimageai.error_caps) when they happened.
type ErrorCap struct {
	Rule          string
	Open          int64  // open errors rows now
	MaxOpen       *int64 // the cap that applies now; nil = none
	Dropped       int64  // failures not recorded (pgimageai.error_counts.dropped)
	LastDroppedAt *time.Time
}

// DroppedErrors returns, in rule order, the rules with failures that their
// cap kept out of pgimageai.errors.
func DroppedErrors(ctx context.Context, conn *pgx.Conn) ([]ErrorCap, error) {
	rows, _ := conn.Query(ctx, `SELECT c.rule, c.open,
  (SELECT max_open FROM pgimageai.error_caps WHERE rule IN (c.rule, '*') ORDER BY rule = '*' LIMIT 1),
  c.dropped, c.last_dropped_at
FROM pgimageai.error_counts c WHERE c.dropped > 0 ORDER BY c.rule`)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ErrorCap, error) {
		var c ErrorCap
		err := r.Scan(&c.Rule, &c.Open, &c.MaxOpen, &c.Dropped, &c.LastDroppedAt)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the failures not recorded: %w", err)
	}
	return out, nil
}
