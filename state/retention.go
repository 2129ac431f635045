package state

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// pruneBatch is how many rows one retention statement deletes, so that no
// statement holds many row locks or runs long.
const pruneBatch = 1000

// Pruned counts the rows one retention pass deleted (or resolved), by table.
type Pruned map[string]int64

// prunes are the retention statements: each deletes at most pruneBatch
// rows, keyed by ctid, of what its pgimageai.retention row says is old; $1
// is the batch size. A kind whose keep is NULL keeps everything.
var prunes = []struct{ table, what, sql string }{
	{"errors", "resolved_errors", `DELETE FROM pgimageai.errors WHERE ctid = ANY(ARRAY(
  SELECT e.ctid FROM pgimageai.errors e, pgimageai.retention r
  WHERE r.what = 'resolved_errors' AND e.resolved_at < now() - r.keep LIMIT $1))`},
	{"usage", "usage", `DELETE FROM pgimageai.usage WHERE ctid = ANY(ARRAY(
  SELECT u.ctid FROM pgimageai.usage u, pgimageai.retention r
  WHERE r.what = 'usage' AND u.day < (now() - r.keep)::date LIMIT $1))`},
	{"own_xacts", "own_xacts", `DELETE FROM pgimageai.own_xacts WHERE ctid = ANY(ARRAY(
  SELECT o.ctid FROM pgimageai.own_xacts o, pgimageai.retention r
  WHERE r.what = 'own_xacts' AND o.created_at < now() - r.keep LIMIT $1))`},
	{"model_pace", "model_pace", `DELETE FROM pgimageai.model_pace WHERE ctid = ANY(ARRAY(
  SELECT p.ctid FROM pgimageai.model_pace p, pgimageai.retention r
  WHERE r.what = 'model_pace' AND p.updated_at < now() - r.keep LIMIT $1))`},
}

// Prune deletes, in batches of pruneBatch rows each in its own short
// transaction, what the retention settings say is old on the target, and
// the rows of rules that no longer exist (a running switch's side rule, in
// pgimageai.switches, exists): their results, their Batch API
// answers, their error counts, and — resolved, not deleted — their open
// errors (counted as errors_resolved). rules is every rule name of pgimageai.rules (every
// group); nil skips that part (the rule list could not be read, or the
// target is another database, which other sources' rules may share).
func Prune(ctx context.Context, conn *pgx.Conn, rules []string) (Pruned, error) {
	out := Pruned{}
	run := func(table, sql string, args ...any) error {
		for {
			tag, err := conn.Exec(ctx, sql, append([]any{pruneBatch}, args...)...)
			if err != nil {
				return fmt.Errorf("retention of pgimageai.%s: %w", table, err)
			}
			out[table] += tag.RowsAffected()
			if tag.RowsAffected() < pruneBatch || ctx.Err() != nil {
				return nil
			}
		}
	}
	for _, p := range prunes {
		if err := run(p.table, p.sql); err != nil {
			return out, err
		}
	}
	if rules == nil {
		return out, nil
	}
	gone := []struct{ table, sql string }{ // table is the label of the count
		{"results", `DELETE FROM pgimageai.results WHERE ctid = ANY(ARRAY(
  SELECT ctid FROM pgimageai.results WHERE NOT rule = ANY($2) AND rule NOT IN (SELECT side_rule FROM pgimageai.switches) LIMIT $1))`},
		{"batch_answers", `DELETE FROM pgimageai.batch_answers WHERE ctid = ANY(ARRAY(
  SELECT ctid FROM pgimageai.batch_answers WHERE NOT rule = ANY($2) AND rule NOT IN (SELECT side_rule FROM pgimageai.switches) LIMIT $1))`},
		{"errors_resolved", `UPDATE pgimageai.errors SET resolved_at = now() WHERE ctid = ANY(ARRAY(
  SELECT ctid FROM pgimageai.errors WHERE resolved_at IS NULL AND NOT rule = ANY($2) AND rule NOT IN (SELECT side_rule FROM pgimageai.switches) LIMIT $1))`},
		// Rows parked for a rule that is gone are sent to nothing.
		{"parked", `DELETE FROM pgimageai.parked WHERE ctid = ANY(ARRAY(
  SELECT ctid FROM pgimageai.parked WHERE NOT rule = ANY($2) AND rule NOT IN (SELECT side_rule FROM pgimageai.switches) LIMIT $1))`},
		// After errors_resolved: the counts of those rules are 0 now.
		{"error_counts", `DELETE FROM pgimageai.error_counts WHERE ctid = ANY(ARRAY(
  SELECT ctid FROM pgimageai.error_counts WHERE open = 0 AND NOT rule = ANY($2) AND rule NOT IN (SELECT side_rule FROM pgimageai.switches) LIMIT $1))`},
	}
	for _, g := range gone {
		if err := run(g.table, g.sql, rules); err != nil {
			return out, err
		}
	}
	return out, nil
}

// RuleNames returns the name of every rule, of every group.
func RuleNames(ctx context.Context, conn *pgx.Conn) ([]string, error) {
	rows, _ := conn.Query(ctx, "SELECT name FROM pgimageai.rules")
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read rule names: %w", err)
	}
	if names == nil {
		names = []string{}
	}
	return names, nil
}

// PruneRetryRequests deletes, on the source, the rows of
// pgimageai.retry_requests that slot has passed and that are older than
// their pgimageai.retention keep, in batches of pruneBatch rows, and
// returns how many it deleted.
//
// The bridge reads a retry request from the WAL (the INSERT, in commit
// order), never from the table, so a row whose commit the slot has
// confirmed will never be read again: it is history. Which rows those are
// is decided in two passes, because a row does not record its commit's
// LSN (the INSERT's own position says nothing of when its transaction
// commits):
//
//  1. A pass notes in seen_lsn, on each row that has none yet, the current
//     WAL insert position. The row is visible to that UPDATE, so its
//     transaction has committed, and PostgreSQL writes a commit record
//     before it makes the transaction visible: the commit's LSN is below
//     seen_lsn.
//  2. A later pass deletes the rows whose seen_lsn is at or below the
//     slot's confirmed_flush_lsn: the slot has confirmed everything up to
//     there, the commit included, and a slot never sends a transaction it
//     confirmed again.
//
// The bridges of other rule groups read the same requests through their
// own slots; they too decode them from the WAL, so a row deleted behind
// this slot is never missed by theirs. The UPDATE and DELETE are changes
// of a published table, which the bridge reads and ignores (only an
// INSERT is a request).
func PruneRetryRequests(ctx context.Context, conn *pgx.Conn, slot string) (int64, error) {
	var n int64
	for {
		tag, err := conn.Exec(ctx, `DELETE FROM pgimageai.retry_requests WHERE ctid = ANY(ARRAY(
  SELECT q.ctid FROM pgimageai.retry_requests q, pgimageai.retention r, pg_replication_slots s
  WHERE r.what = 'retry_requests' AND s.slot_name = $2 AND q.seen_lsn <= s.confirmed_flush_lsn
    AND q.requested_at < now() - r.keep LIMIT $1))`, pruneBatch, slot)
		if err != nil {
			return n, fmt.Errorf("retention of pgimageai.retry_requests: %w", err)
		}
		n += tag.RowsAffected()
		if tag.RowsAffected() < pruneBatch || ctx.Err() != nil {
			break
		}
	}
	if _, err := conn.Exec(ctx, `UPDATE pgimageai.retry_requests SET seen_lsn = pg_current_wal_insert_lsn() WHERE seen_lsn IS NULL`); err != nil {
		return n, fmt.Errorf("retention of pgimageai.retry_requests: note the WAL position: %w", err)
	}
	return n, nil
}
