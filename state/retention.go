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
// the rows of rules that no longer exist: their results, their Batch API
// answers, and — resolved, not deleted — their open errors (counted as
// errors_resolved). rules is every rule name of pgimageai.rules (every
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
  SELECT ctid FROM pgimageai.results WHERE NOT rule = ANY($2) LIMIT $1))`},
		{"batch_answers", `DELETE FROM pgimageai.batch_answers WHERE ctid = ANY(ARRAY(
  SELECT ctid FROM pgimageai.batch_answers WHERE NOT rule = ANY($2) LIMIT $1))`},
		{"errors_resolved", `UPDATE pgimageai.errors SET resolved_at = now() WHERE ctid = ANY(ARRAY(
  SELECT ctid FROM pgimageai.errors WHERE resolved_at IS NULL AND NOT rule = ANY($2) LIMIT $1))`},
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
