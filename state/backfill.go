package state

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/value"
)

// Backfill is a row of pgimageai.backfills: how far the backfill of a rule
// got, for what the rule computed (its fingerprint).
type Backfill struct {
	State       value.BackfillState
	Fingerprint string
	LastKey     []byte // source_key JSON of the last row processed; nil before the first page
	StopKey     []byte // the greatest key when it started; nil for an empty table
}

// LoadBackfill returns the backfill row of rule; found is false when there
// is none.
func LoadBackfill(ctx context.Context, conn *pgx.Conn, rule string) (b Backfill, found bool, err error) {
	err = conn.QueryRow(ctx, "SELECT state, fingerprint, last_key::text, stop_key::text FROM pgimageai.backfills WHERE rule = $1", rule).
		Scan(&b.State, &b.Fingerprint, &b.LastKey, &b.StopKey)
	if errors.Is(err, pgx.ErrNoRows) {
		return b, false, nil
	}
	if err != nil {
		return b, false, fmt.Errorf("backfill state of %s: %w", rule, err)
	}
	return b, true, nil
}

// StartBackfill records a new backfill of rule up to stop (nil: an empty
// table, done at once), with an estimate of the rows from table's
// pg_class.reltuples.
func StartBackfill(ctx context.Context, conn *pgx.Conn, rule, fingerprint string, stop []byte, table uint32) error {
	state := value.BackfillRunning
	var stopKey any
	if stop == nil {
		state = value.BackfillDone
	} else {
		stopKey = string(stop)
	}
	// A new backfill starts over: the batches of the one before are of no
	// use any more (cancelled and deleted at the provider, see
	// pgimageai.batch_cleanup), nor are their answers.
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := giveUpBatches(ctx, tx, []string{rule}); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO pgimageai.backfills (rule, state, fingerprint, stop_key, rows_total, finished_at)
VALUES ($1, $2, $3, $4, (SELECT CASE WHEN reltuples >= 0 THEN reltuples::bigint END FROM pg_class WHERE oid = $5), CASE WHEN $2 = 'done' THEN now() END)
ON CONFLICT (rule) DO UPDATE SET state = EXCLUDED.state, fingerprint = EXCLUDED.fingerprint, last_key = NULL,
  stop_key = EXCLUDED.stop_key, rows_done = 0, rows_total = EXCLUDED.rows_total, started_at = now(), updated_at = now(),
  finished_at = EXCLUDED.finished_at`, rule, state, fingerprint, stopKey, table)
		return err
	})
	if err != nil {
		return fmt.Errorf("start backfill of %s: %w", rule, err)
	}
	return nil
}

// ForgetBackfills deletes the backfill rows of rules: when they run again,
// they backfill from the start. The batches of their Batch API backfills go
// to pgimageai.batch_cleanup, to be cancelled and deleted at the provider.
func ForgetBackfills(ctx context.Context, conn *pgx.Conn, rules ...string) error {
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := giveUpBatches(ctx, tx, rules); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "DELETE FROM pgimageai.backfills WHERE rule = ANY($1)", rules)
		return err
	})
	if err != nil {
		return fmt.Errorf("forget backfills of %v: %w", rules, err)
	}
	return nil
}

// Refingerprint records that rule's done backfill, stored under fingerprint
// old, is done for fingerprint new (the same computation, fingerprinted
// anew): a later change of the rule then compares with new.
func Refingerprint(ctx context.Context, conn *pgx.Conn, rule, old, new string) error {
	if _, err := conn.Exec(ctx, "UPDATE pgimageai.backfills SET fingerprint = $3 WHERE rule = $1 AND fingerprint = $2", rule, old, new); err != nil {
		return fmt.Errorf("backfill state of %s: %w", rule, err)
	}
	return nil
}
