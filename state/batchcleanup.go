package state

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// giveUpBatches moves the batches of rules' backfills to
// pgimageai.batch_cleanup — those that may still run or hold files at the
// provider: every batch whose answers were not stored (a stored batch's
// files were deleted then) — and deletes their answers. The backfills of
// rules are being forgotten or started over.
func giveUpBatches(ctx context.Context, tx pgx.Tx, rules []string) error {
	_, err := tx.Exec(ctx, `WITH gone AS (
  DELETE FROM pgimageai.backfill_batches WHERE rule = ANY($1) RETURNING *
)
INSERT INTO pgimageai.batch_cleanup (rule, model, batch_id, input_file_id, files)
SELECT rule, model, batch_id, input_file_id, array_remove(ARRAY[input_file_id, output_file_id, error_file_id], NULL)
FROM gone WHERE NOT downloaded AND (batch_id IS NOT NULL OR input_file_id IS NOT NULL)`, rules)
	if err != nil {
		return fmt.Errorf("give up the batches of %v: %w", rules, err)
	}
	if _, err := tx.Exec(ctx, "DELETE FROM pgimageai.batch_answers WHERE rule = ANY($1)", rules); err != nil {
		return fmt.Errorf("forget the batch answers of %v: %w", rules, err)
	}
	return nil
}

// BatchCleanup is a row of pgimageai.batch_cleanup: a batch of a given-up
// backfill, to be cancelled at the provider of Model, and its Files deleted.
type BatchCleanup struct {
	ID          int64
	Rule        string
	Model       string // "": unknown (recorded before the model was)
	BatchID     string // "": never recorded; it may exist over InputFileID
	InputFileID string
	Files       []string
}

// BatchCleanups returns the batches to clean up, oldest first.
func BatchCleanups(ctx context.Context, conn *pgx.Conn) ([]BatchCleanup, error) {
	rows, _ := conn.Query(ctx, `SELECT id, rule, coalesce(model, ''), coalesce(batch_id, ''), coalesce(input_file_id, ''), files
FROM pgimageai.batch_cleanup ORDER BY id`)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (BatchCleanup, error) {
		var c BatchCleanup
		err := row.Scan(&c.ID, &c.Rule, &c.Model, &c.BatchID, &c.InputFileID, &c.Files)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("read batch cleanups: %w", err)
	}
	return out, nil
}

// CleanedUp deletes the batch_cleanup row id: the provider holds nothing of
// its batch any more (or never will be asked).
func CleanedUp(ctx context.Context, conn *pgx.Conn, id int64) error {
	if _, err := conn.Exec(ctx, "DELETE FROM pgimageai.batch_cleanup WHERE id = $1", id); err != nil {
		return fmt.Errorf("delete batch cleanup %d: %w", id, err)
	}
	return nil
}

// PendingBatchRequests returns, by model, the batch requests that the daily
// budget counted on day (UTC) and pgimageai.usage does not hold yet: the
// requests of the batches recorded that day whose range is not applied —
// all of them until the answers are stored, then those answered or failed
// (the others were given back, their rows get synchronous calls). Refused
// batches count none.
func PendingBatchRequests(ctx context.Context, conn *pgx.Conn, day time.Time) (map[string]int64, error) {
	rows, _ := conn.Query(ctx, `SELECT model, sum(CASE WHEN downloaded THEN least(completed + failed, requests) ELSE requests END)::bigint
FROM pgimageai.backfill_batches
WHERE model IS NOT NULL AND NOT applied AND requests > 0 AND status <> $2
  AND (created_at AT TIME ZONE 'UTC')::date = $1
GROUP BY model`, day, Refused)
	out := map[string]int64{}
	var model string
	var n int64
	_, err := pgx.ForEachRow(rows, []any{&model, &n}, func() error {
		out[model] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read pending batch requests: %w", err)
	}
	return out, nil
}

// BatchRow is a row of pgimageai.backfill_batches as status lists it.
type BatchRow struct {
	Rule       string
	Seq        int
	BatchID    string // "": not created (yet)
	Status     string
	Requests   int
	Completed  int
	Failed     int
	Downloaded bool
	Applied    bool
	Created    time.Time
	Age        time.Duration // by the database's clock
}

// Batches reads every batch of the Batch API backfills, by rule and seq.
func Batches(ctx context.Context, conn *pgx.Conn) ([]BatchRow, error) {
	rows, _ := conn.Query(ctx, `SELECT rule, seq, coalesce(batch_id, ''), status, requests, completed, failed, downloaded, applied,
  created_at, now() - created_at
FROM pgimageai.backfill_batches ORDER BY rule, seq`)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (BatchRow, error) {
		var b BatchRow
		err := row.Scan(&b.Rule, &b.Seq, &b.BatchID, &b.Status, &b.Requests, &b.Completed, &b.Failed, &b.Downloaded, &b.Applied,
			&b.Created, &b.Age)
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("read batches: %w", err)
	}
	return out, nil
}

// GiveUpOrphanBatches gives up the batches of every rule but keep — rules
// deleted, disabled or made invalid while no bridge ran — as
// ForgetBackfills does for a rule that stops while it runs; it returns
// those rules.
func GiveUpOrphanBatches(ctx context.Context, conn *pgx.Conn, keep []string) ([]string, error) {
	var orphans []string
	err := conn.QueryRow(ctx, "SELECT coalesce(array_agg(DISTINCT rule), '{}') FROM pgimageai.backfill_batches WHERE NOT rule = ANY($1)", keep).
		Scan(&orphans)
	if err != nil {
		return nil, fmt.Errorf("read the batches of stopped rules: %w", err)
	}
	if len(orphans) == 0 {
		return nil, nil
	}
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return giveUpBatches(ctx, tx, orphans) }); err != nil {
		return nil, err
	}
	return orphans, nil
}
