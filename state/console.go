package state

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/value"
)

// What the web console (package console) reads beside the reports of
// status: the open errors with their image heads, and each rule's calls of
// the day, which it samples for its rows-per-minute chart.

// ConsoleError is an open errors row as the console's errors page shows it:
// the row and the first bytes of its image, from which the page names the
// format of an image that does not decode.
type ConsoleError struct {
	OpenError
	ImageHead []byte // nil where there was no image
}

// ConsoleErrors reads the open errors of rule with reason ("" matches all),
// newest first, at most limit of them, and how many match in all.
func ConsoleErrors(ctx context.Context, conn *pgx.Conn, rule, reason string, limit int) (errs []ConsoleError, matching int64, err error) {
	rows, _ := conn.Query(ctx, `SELECT id, rule, source_table, source_key::text, reason, detail,
  image_bytes, image_head, lsn, attempts, created_at, count(*) OVER ()
FROM pgimageai.errors
WHERE resolved_at IS NULL AND ($1::text = '' OR rule = $1) AND ($2::text = '' OR reason = $2)
ORDER BY created_at DESC, id DESC
LIMIT $3`, rule, reason, limit)
	errs, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (ConsoleError, error) {
		var e ConsoleError
		var key string
		err := row.Scan(&e.ID, &e.Rule, &e.SourceTable, &key, &e.Reason, &e.Detail,
			&e.ImageBytes, &e.ImageHead, &e.LSN, &e.Attempts, &e.CreatedAt, &matching)
		e.SourceKey = json.RawMessage(key)
		return e, err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list open errors: %w", err)
	}
	return errs, matching, nil
}

// CallsToday returns, by rule, the calls pgimageai.usage counts for the
// current UTC day (the database's clock): one row per rule and model, so
// the read costs a few rows whatever the size of the results.
func CallsToday(ctx context.Context, conn *pgx.Conn) (map[string]int64, error) {
	rows, _ := conn.Query(ctx, `SELECT rule, sum(calls)::bigint FROM pgimageai.usage
WHERE day = (now() AT TIME ZONE 'UTC')::date GROUP BY rule`)
	out := map[string]int64{}
	var rule string
	var n int64
	_, err := pgx.ForEachRow(rows, []any{&rule, &n}, func() error {
		out[rule] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read today's calls: %w", err)
	}
	return out, nil
}

// RetryRowKeys is RetryKeys for the one source row keyed key (source_key
// JSON) of rule: its key when it has an open error other than invalid_rule,
// whatever the reason.
func RetryRowKeys(ctx context.Context, conn *pgx.Conn, rule, key string) ([]RuleKeys, error) {
	rows, _ := conn.Query(ctx, `SELECT rule, jsonb_agg(source_key ORDER BY id) FROM pgimageai.errors
WHERE resolved_at IS NULL AND reason <> 'invalid_rule' AND rule = $1 AND source_key = $2::jsonb
GROUP BY rule`, rule, key)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RuleKeys, error) {
		var k RuleKeys
		err := r.Scan(&k.Rule, &k.Keys)
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("retry: read the open error of a row: %w", err)
	}
	return out, nil
}

// CountRetryableRow counts the open errors, invalid_rule ones aside, of
// rule's source row keyed key: 0 or 1.
func CountRetryableRow(ctx context.Context, conn *pgx.Conn, rule, key string) (int64, error) {
	var n int64
	err := conn.QueryRow(ctx, `SELECT count(*) FROM pgimageai.errors
WHERE resolved_at IS NULL AND reason <> 'invalid_rule' AND rule = $1 AND source_key = $2::jsonb`, rule, key).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count the open errors of a row: %w", err)
	}
	return n, nil
}

// RequestRetryRow is RequestRetry of the one source row keyed key of rule.
func RequestRetryRow(ctx context.Context, conn *pgx.Conn, rule, key string) (value.LSN, error) {
	if _, err := conn.Exec(ctx, "INSERT INTO pgimageai.retry_requests (rule, source_key) VALUES ($1, $2::jsonb)", rule, key); err != nil {
		return 0, fmt.Errorf("insert retry request: %w", err)
	}
	var lsn value.LSN
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()").Scan(&lsn); err != nil {
		return 0, fmt.Errorf("read WAL position: %w", err)
	}
	return lsn, nil
}
