package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/pgimageai/pgimageai/cmd/pgimageai/internal/render"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/state"
)

// retryRequest is a row of pgimageai.retry_requests: the filters, "" for
// none; no filter asks for every open error but invalid_rule ones.
type retryRequest struct {
	Rule   string
	Reason functions.Reason
}

// retry counts the open errors that match the filters and, when there are
// any, inserts ONE row into pgimageai.retry_requests on the source. The table
// is in the bridge's publication: the bridge reads the row from its slot in
// commit order and reprocesses the rows, so the request is as durable as a
// change and needs no connection to the bridge — and only roles granted
// INSERT on it may ask. invalid_rule errors are left out: they go
// when the rule is fixed.
func retry(ctx context.Context, c config, stdout, _ io.Writer) error {
	source, target, closeAll, err := connectBoth(ctx, c)
	if err != nil {
		return err
	}
	defer closeAll()
	if err := c.resolveSlotOn(ctx, source, target); err != nil {
		return err
	}
	n, err := countRetryable(ctx, target, c.Query)
	if err != nil {
		return err
	}
	if n == 0 {
		fmt.Fprintf(stdout, "no open errors%s (invalid_rule aside); nothing to retry\n", render.MatchText(c.Query.Rule, c.Query.Reason))
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
	fmt.Fprintln(stdout, render.RetryText(n, lsn))
	if !active {
		fmt.Fprintf(stdout, "slot %s is not active: the request waits in the WAL until pgimageai run resumes\n", c.Slot)
	}
	return nil
}

// countRetryable counts the open errors, invalid_rule ones aside, that match
// q's filters.
func countRetryable(ctx context.Context, target *database, q queryFlags) (int64, error) {
	n, err := state.CountRetryable(ctx, target.conn, q.Rule, q.Reason)
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
	slot, err := replication.ReadSlotHere(ctx, source.conn, name)
	switch {
	case errors.Is(err, replication.ErrNoSlot):
		return false, fmt.Errorf("slot %s does not exist on the %s database %s: start pgimageai run first (a retry request written before the slot exists would never reach the bridge)",
			name, source.role, source.where)
	case errors.Is(err, replication.ErrSlotMismatch):
		return false, fmt.Errorf("slot %s belongs to database %q, not to the source database %s: check --slot and --dsn",
			name, slot.Database, source.where)
	case err != nil:
		return false, fmt.Errorf("%s database %s: %w", source.role, source.where, err)
	}
	return slot.Active, nil
}

// emitRetry inserts the retry request and returns the WAL position right
// after its commit: the bridge sees it there, in commit order with the
// changes around it.
func emitRetry(ctx context.Context, source *database, req retryRequest) (replication.LSN, error) {
	lsn, err := state.RequestRetry(ctx, source.conn, req.Rule, req.Reason)
	if err != nil {
		return 0, source.explain("request a retry", err)
	}
	return lsn, nil
}
