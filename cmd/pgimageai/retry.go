package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/replication"
)

// retryPrefix is the prefix of the logical decoding message that asks the
// running bridge to reprocess the current source rows behind open errors.
const retryPrefix = "pgimageai.retry"

// retryRequest is the content of a retry message, as JSON: the filters, unset
// ones omitted; {} asks for every open error but invalid_rule ones.
type retryRequest struct {
	Rule   string           `json:"rule,omitempty"`
	Reason functions.Reason `json:"reason,omitempty"`
}

// retry counts the open errors that match the filters and, when there are
// any, writes ONE transactional logical decoding message into the source's
// WAL. The bridge reads it from its slot in commit order and reprocesses the
// rows, so the request is as durable as a change and needs no connection to
// the bridge. invalid_rule errors are left out: they go when the rule is fixed.
func retry(ctx context.Context, c config, stdout, _ io.Writer) error {
	source, target, closeAll, err := connectBoth(ctx, c)
	if err != nil {
		return err
	}
	defer closeAll()
	n, err := countRetryable(ctx, target, c.Query)
	if err != nil {
		return err
	}
	if n == 0 {
		fmt.Fprintf(stdout, "no open errors%s (invalid_rule aside); nothing to retry\n", matchText(c.Query))
		return nil
	}
	active, err := checkRetrySlot(ctx, source, c.Slot)
	if err != nil {
		return err
	}
	lsn, err := emitRetry(ctx, source, retryRequest{Rule: c.Query.Rule, Reason: c.Query.Reason})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, retryText(n, lsn))
	if !active {
		fmt.Fprintf(stdout, "slot %s is not active: the request waits in the WAL until pgimageai run resumes\n", c.Slot)
	}
	return nil
}

// retryText says what retry asked for.
func retryText(n int64, lsn replication.LSN) string {
	if n == 1 {
		return fmt.Sprintf("1 open error matches; the running bridge will reprocess it at WAL position %s", lsn)
	}
	return fmt.Sprintf("%d open errors match; the running bridge will reprocess them at WAL position %s", n, lsn)
}

// countRetryable counts the open errors, invalid_rule ones aside, that match
// q's filters.
func countRetryable(ctx context.Context, target *database, q queryFlags) (int64, error) {
	var n int64
	err := target.conn.QueryRow(ctx, `SELECT count(*) FROM pgimageai.errors
WHERE resolved_at IS NULL AND reason <> $1 AND ($2::text = '' OR rule = $2) AND ($3::text = '' OR reason = $3)`,
		string(functions.InvalidRule), q.Rule, string(q.Reason)).Scan(&n)
	if err != nil {
		return 0, target.explain("count open errors", err)
	}
	return n, nil
}

// checkRetrySlot makes sure that the bridge's slot exists in the source
// database: a message written before the slot exists, or into another
// database, never reaches the bridge. active reports whether a bridge is
// streaming from it now.
func checkRetrySlot(ctx context.Context, source *database, name string) (active bool, err error) {
	slot, found, err := replication.ReadSlot(ctx, source.conn, name)
	if err != nil {
		return false, fmt.Errorf("%s database %s: %w", source.role, source.where, err)
	}
	var db string
	if err := source.conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		return false, source.explain("read current database", err)
	}
	switch {
	case !found:
		return false, fmt.Errorf("slot %s does not exist on the %s database %s: start pgimageai run first (a retry request written before the slot exists would never reach the bridge)",
			name, source.role, source.where)
	case slot.Database != db:
		return false, fmt.Errorf("slot %s belongs to database %q, not to the source database %s: check --slot and --dsn",
			name, slot.Database, source.where)
	}
	return slot.Active, nil
}

// emitRetry writes the retry message and returns its LSN. The message is
// transactional: the bridge sees it when its transaction commits, in commit
// order with the changes around it.
// See https://www.postgresql.org/docs/current/functions-admin.html#FUNCTIONS-REPLICATION
func emitRetry(ctx context.Context, source *database, req retryRequest) (replication.LSN, error) {
	content, err := json.Marshal(req)
	if err != nil {
		return 0, fmt.Errorf("encode retry request: %w", err)
	}
	var lsn replication.LSN
	err = source.conn.QueryRow(ctx, "SELECT pg_logical_emit_message(true, $1, $2::text)", retryPrefix, string(content)).Scan(&lsn)
	if err != nil {
		return 0, source.explain("emit retry message", err)
	}
	return lsn, nil
}
