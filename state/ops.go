package state

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgimageai/pgimageai/value"
)

// The ops below implement sink.Op: each queues its statement on the batch of
// a lane's target transaction, beside the results it belongs with.

// Error records a failed function call: ONE open row per rule and source row,
// whose attempts count up when the row fails again — unless the rule is at
// its cap of open rows (pgimageai.error_caps) and the row has none open:
// then the failure is only counted, in pgimageai.error_counts.dropped.
type Error struct {
	Rule        string
	SourceTable string
	Key         []byte // source_key JSON, e.g. {"id": 42}
	Reason      string
	Detail      string
	ImageBytes  *int   // nil when there was no image
	ImageHead   []byte // first 16 bytes
	LSN         value.LSN
	// InputKey identifies the call of a permanent failure, so that a
	// restart does not pay for it again; nil otherwise.
	InputKey []byte
	// Dropped, when not nil, is set by each write of the op: true when the
	// cap refused the row and the failure was counted instead. Read it
	// after the transaction committed; a write tried again sets it again.
	Dropped *bool
}

// Queue queues two statements. The first makes sure the rule's counts row
// exists, so that the second can lock it: writers of one rule's errors
// take turns on that row (it is locked until their transaction ends, by
// FOR UPDATE here and by the trigger that counts open rows), and each sees
// the count its predecessors committed. The cap is therefore exact for the
// bridge's writes, whatever the number of lanes or bridges; only the ONE
// invalid_rule row of a rule, which is not capped, can come on top of it.
// The check costs two primary-key lookups and one lookup in the index of
// open rows, never a count over pgimageai.errors.
func (o Error) Queue(b *pgx.Batch) {
	b.Queue(`INSERT INTO pgimageai.error_counts (rule) VALUES ($1) ON CONFLICT (rule) DO NOTHING`, o.Rule)
	q := b.Queue(`WITH cap AS (
  SELECT max_open FROM pgimageai.error_caps WHERE rule IN ($1, '*') ORDER BY rule = '*' LIMIT 1
), counted AS (
  SELECT open FROM pgimageai.error_counts WHERE rule = $1 FOR UPDATE
), recorded AS (
  INSERT INTO pgimageai.errors AS e (rule, source_table, source_key, reason, detail, image_bytes, image_head, lsn, input_key)
  SELECT $1::text, $2::text, $3::jsonb, $4::text, $5::text, $6::integer, $7::bytea, $8::pg_lsn, $9::bytea
  WHERE EXISTS (SELECT FROM pgimageai.errors WHERE rule = $1 AND source_key = $3 AND resolved_at IS NULL)
    OR (SELECT max_open FROM cap) IS NULL
    OR coalesce((SELECT open FROM counted), 0) < (SELECT max_open FROM cap)
  ON CONFLICT (rule, source_key) WHERE resolved_at IS NULL DO UPDATE SET
    reason = EXCLUDED.reason, detail = EXCLUDED.detail, image_bytes = EXCLUDED.image_bytes,
    image_head = EXCLUDED.image_head, lsn = EXCLUDED.lsn, input_key = EXCLUDED.input_key, attempts = e.attempts + 1
  RETURNING 1
)
UPDATE pgimageai.error_counts SET dropped = dropped + 1, last_dropped_at = now()
WHERE rule = $1 AND NOT EXISTS (SELECT FROM recorded)`,
		o.Rule, o.SourceTable, string(o.Key), o.Reason, o.Detail, o.ImageBytes, o.ImageHead, o.LSN, o.InputKey)
	if o.Dropped != nil {
		q.Exec(func(ct pgconn.CommandTag) error {
			*o.Dropped = ct.RowsAffected() > 0
			return nil
		})
	}
}

// PermanentFailure is an open errors row of a permanent failure: the call it
// came from and its reason.
type PermanentFailure struct {
	InputKey       []byte
	Reason, Detail string
}

// PermanentFailures returns up to limit open errors rows that carry the key
// of a permanently failed call, newest first.
func PermanentFailures(ctx context.Context, conn *pgx.Conn, limit int) ([]PermanentFailure, error) {
	rows, _ := conn.Query(ctx, `SELECT input_key, reason, detail FROM pgimageai.errors
WHERE resolved_at IS NULL AND input_key IS NOT NULL ORDER BY id DESC LIMIT $1`, limit)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PermanentFailure, error) {
		var f PermanentFailure
		err := r.Scan(&f.InputKey, &f.Reason, &f.Detail)
		return f, err
	})
	if err != nil {
		return nil, fmt.Errorf("read permanent failures: %w", err)
	}
	return out, nil
}

// Resolve marks the open errors rows of a rule and source row resolved, after
// a later call for that row succeeded.
type Resolve struct {
	Rule string
	Key  []byte
}

func (o Resolve) Queue(b *pgx.Batch) {
	b.Queue(`UPDATE pgimageai.errors SET resolved_at = now()
WHERE rule = $1 AND source_key = $2 AND resolved_at IS NULL`, o.Rule, string(o.Key))
}

// ForgetRow resolves the open row errors of Rules for a deleted source row
// (Key set) or for every row of a truncated source table (Key nil);
// invalid_rule rows stay. The rules are those of one lane: another lane may
// still be behind, writing errors of the row's earlier versions.
type ForgetRow struct {
	SourceTable string
	Key         []byte
	Rules       []string
}

func (o ForgetRow) Queue(b *pgx.Batch) {
	if o.Key == nil {
		b.Queue(`UPDATE pgimageai.errors SET resolved_at = now()
WHERE source_table = $1 AND rule = ANY($2) AND resolved_at IS NULL AND reason <> 'invalid_rule'`, o.SourceTable, o.Rules)
		b.Queue(`DELETE FROM pgimageai.results WHERE rule = ANY($1)`, o.Rules)
		return
	}
	b.Queue(`UPDATE pgimageai.errors SET resolved_at = now()
WHERE source_table = $1 AND source_key = $2 AND rule = ANY($3) AND resolved_at IS NULL AND reason <> 'invalid_rule'`, o.SourceTable, string(o.Key), o.Rules)
	b.Queue(`DELETE FROM pgimageai.results WHERE source_key = $1 AND rule = ANY($2)`, string(o.Key), o.Rules)
}

// RekeyErrors points the open errors rows of Rules (one lane's) for a source
// row at its new key after a primary-key change.
type RekeyErrors struct {
	SourceTable    string
	OldKey, NewKey []byte
	Rules          []string
}

func (o RekeyErrors) Queue(b *pgx.Batch) {
	// Open errors left at the new key (a row deleted there while the rule
	// did not run) are stale: resolved first, or the rekey would hit the
	// one-open-error-per-row index.
	b.Queue(`UPDATE pgimageai.errors SET resolved_at = now()
WHERE source_table = $1 AND source_key = $2 AND rule = ANY($3) AND resolved_at IS NULL`, o.SourceTable, string(o.NewKey), o.Rules)
	b.Queue(`UPDATE pgimageai.errors SET source_key = $3
WHERE source_table = $1 AND source_key = $2 AND rule = ANY($4) AND resolved_at IS NULL`, o.SourceTable, string(o.OldKey), string(o.NewKey), o.Rules)
	// What the results were computed from moves with the row, so a key
	// move costs no call.
	b.Queue(`DELETE FROM pgimageai.results r WHERE r.source_key = $1 AND r.rule = ANY($2)
  AND EXISTS (SELECT FROM pgimageai.results o WHERE o.rule = r.rule AND o.source_key = $3)`, string(o.NewKey), o.Rules, string(o.OldKey))
	b.Queue(`UPDATE pgimageai.results SET source_key = $2 WHERE source_key = $1 AND rule = ANY($3)`, string(o.OldKey), string(o.NewKey), o.Rules)
}

// ResultInput records what the result of Rule for the row keyed Key was
// computed from (InputKey), or, with a nil InputKey, forgets it (the result is
// NULL or failed, or the row's image is gone).
type ResultInput struct {
	Rule     string
	Key      []byte
	InputKey []byte
	Version  string // the rule's version (pgimageai.versions) that computed it
}

func (o ResultInput) Queue(b *pgx.Batch) {
	if o.InputKey == nil {
		b.Queue(`DELETE FROM pgimageai.results WHERE rule = $1 AND source_key = $2`, o.Rule, string(o.Key))
		return
	}
	b.Queue(`INSERT INTO pgimageai.results (rule, source_key, input_key, version) VALUES ($1, $2, $3, nullif($4, ''))
ON CONFLICT (rule, source_key) DO UPDATE SET input_key = EXCLUDED.input_key, version = EXCLUDED.version`, o.Rule, string(o.Key), o.InputKey, o.Version)
}

// ResultInputs is ResultInput for many distinct rows of one rule, in two
// statements at most: the rows with an input (InputKeys[i] != nil) stored,
// the others forgotten.
type ResultInputs struct {
	Rule      string
	Version   string   // the rule's version that computed them
	Keys      []string // source_key JSON
	InputKeys [][]byte
}

func (o ResultInputs) Queue(b *pgx.Batch) {
	var setKeys, gone []string
	var inputs [][]byte
	for i, k := range o.Keys {
		if o.InputKeys[i] == nil {
			gone = append(gone, k)
		} else {
			setKeys, inputs = append(setKeys, k), append(inputs, o.InputKeys[i])
		}
	}
	if len(gone) > 0 {
		b.Queue(`DELETE FROM pgimageai.results WHERE rule = $1 AND source_key = ANY ($2::jsonb[])`, o.Rule, gone)
	}
	if len(setKeys) > 0 {
		b.Queue(`INSERT INTO pgimageai.results (rule, source_key, input_key, version)
SELECT $1, k, i, nullif($4, '') FROM unnest($2::jsonb[], $3::bytea[]) AS v (k, i)
ON CONFLICT (rule, source_key) DO UPDATE SET input_key = EXCLUDED.input_key, version = EXCLUDED.version`, o.Rule, setKeys, inputs, o.Version)
	}
}

// Resolves is Resolve for many rows of one rule, in one statement.
type Resolves struct {
	Rule string
	Keys []string // source_key JSON
}

func (o Resolves) Queue(b *pgx.Batch) {
	b.Queue(`UPDATE pgimageai.errors SET resolved_at = now()
WHERE rule = $1 AND source_key = ANY ($2::jsonb[]) AND resolved_at IS NULL`, o.Rule, o.Keys)
}

// Querier runs a query that returns one row: a *pgx.Conn, a *pgxpool.Pool.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// SameInput reports whether the stored result of rule for the row keyed key
// was computed from inputKey: then a change that gives the same input needs
// no call.
func SameInput(ctx context.Context, q Querier, rule string, key, inputKey []byte) (bool, error) {
	var same bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pgimageai.results WHERE rule = $1 AND source_key = $2 AND input_key = $3)`,
		rule, string(key), inputKey).Scan(&same)
	if err != nil {
		return false, fmt.Errorf("read the input of the stored result: %w", err)
	}
	return same, nil
}

// StoredInputs returns, for each source_key JSON of keys, the input key of
// rule's stored result (pgimageai.results), or nil: one query for a page of
// rows, rather than one per row.
func StoredInputs(ctx context.Context, conn *pgx.Conn, rule string, keys []string) ([][]byte, error) {
	out := make([][]byte, len(keys))
	rows, _ := conn.Query(ctx, `SELECT k.ord, r.input_key FROM unnest($2::text[]) WITH ORDINALITY AS k(key, ord)
JOIN pgimageai.results r ON r.rule = $1 AND r.source_key = k.key::jsonb`, rule, keys)
	var ord int64
	var input []byte
	_, err := pgx.ForEachRow(rows, []any{&ord, &input}, func() error {
		out[ord-1] = append([]byte(nil), input...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("stored inputs of %s: %w", rule, err)
	}
	return out, nil
}

// OwnWrites marks the target transaction as the bridge's own: when the target
// is a published source table (write-back), the bridge reads its own changes
// back from the WAL and must ignore them, or it would loop. It records the
// transaction's ID in pgimageai.own_xacts (for a restart) and hands it to
// Note before the transaction commits; the bridge skips the transaction whose
// Begin carries that ID. Only the bridge's role may write that table, so no
// other transaction can pass for one of its own.
type OwnWrites struct {
	Note func(xid uint64) // the full ID: epoch and XID (bridge/apply.Own widens the stream's)
}

func (o OwnWrites) Queue(b *pgx.Batch) {
	b.Queue(`INSERT INTO pgimageai.own_xacts (xid) VALUES (txid_current()) RETURNING xid`).QueryRow(func(row pgx.Row) error {
		var xid int64
		if err := row.Scan(&xid); err != nil {
			return err
		}
		if o.Note != nil {
			o.Note(uint64(xid))
		}
		return nil
	})
}

// OwnXacts returns the transaction IDs of the bridge's own write-back
// transactions of the last week, after deleting older ones: those that a
// restart may read again from the slot.
func OwnXacts(ctx context.Context, conn *pgx.Conn) ([]uint64, error) {
	if _, err := conn.Exec(ctx, "DELETE FROM pgimageai.own_xacts WHERE created_at < now() - interval '7 days'"); err != nil {
		return nil, fmt.Errorf("prune own transactions: %w", err)
	}
	rows, _ := conn.Query(ctx, "SELECT xid FROM pgimageai.own_xacts")
	xids, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (uint64, error) {
		var xid int64
		err := r.Scan(&xid)
		return uint64(xid), err
	})
	if err != nil {
		return nil, fmt.Errorf("read own transactions: %w", err)
	}
	return xids, nil
}

// NextXID returns the server's next transaction ID, epoch included
// (txid_snapshot_xmax of the current snapshot), without taking one.
func NextXID(ctx context.Context, conn *pgx.Conn) (uint64, error) {
	var next int64
	if err := conn.QueryRow(ctx, "SELECT txid_snapshot_xmax(txid_current_snapshot())").Scan(&next); err != nil {
		return 0, fmt.Errorf("read the next transaction ID: %w", err)
	}
	return uint64(next), nil
}

// BackfillProgress records a backfill page of a rule: the last key processed
// and how many rows, or that the backfill is done.
type BackfillProgress struct {
	Rule        string
	Fingerprint string
	LastKey     []byte // nil when the page was empty
	Rows        int
	Done        bool
	// Batch: a backfill through a batch API, whose answers (state/batch.go)
	// are deleted when it is done.
	Batch bool
	// Part is the batch (its seq) whose range of rows the page is of, in a
	// backfill through a batch API, which applies each batch's range as
	// soon as its answers are stored, in whatever order the batches
	// finish; 0: a page of the backfill's own order. A part's page moves
	// its batch's applied_key (PartDone: its range is applied), not the
	// backfill's last_key.
	Part     int
	PartDone bool
}

func (o BackfillProgress) Queue(b *pgx.Batch) {
	var last any
	if o.LastKey != nil {
		last = string(o.LastKey)
	}
	if o.Part > 0 {
		b.Queue("UPDATE pgimageai.backfills SET rows_done = rows_done + $2, updated_at = now() WHERE rule = $1 AND fingerprint = $3",
			o.Rule, o.Rows, o.Fingerprint)
		b.Queue(`UPDATE pgimageai.backfill_batches SET applied_key = coalesce($3::jsonb, applied_key), applied = applied OR $4, updated_at = now()
WHERE rule = $1 AND seq = $2 AND fingerprint = $5`, o.Rule, o.Part, last, o.PartDone, o.Fingerprint)
		return
	}
	state := value.BackfillRunning
	if o.Done {
		state = value.BackfillDone
	}
	b.Queue(`INSERT INTO pgimageai.backfills AS b (rule, state, last_key, rows_done, fingerprint, finished_at)
VALUES ($1, $2, $3, $4, $5, CASE WHEN $2 = 'done' THEN now() END)
ON CONFLICT (rule) DO UPDATE SET state = EXCLUDED.state, last_key = coalesce(EXCLUDED.last_key, b.last_key),
  rows_done = b.rows_done + EXCLUDED.rows_done, updated_at = now(), finished_at = EXCLUDED.finished_at`,
		o.Rule, state, last, o.Rows, o.Fingerprint)
	if o.Done && o.Batch { // its answers served
		b.Queue("DELETE FROM pgimageai.batch_answers WHERE rule = $1", o.Rule)
	}
}

// Usage adds provider usage to a rule's and model's count of the current UTC
// day.
type Usage struct {
	Rule, Model                           string
	Calls, PromptTokens, CompletionTokens int64
}

func (o Usage) Queue(b *pgx.Batch) {
	b.Queue(`INSERT INTO pgimageai.usage AS u (rule, model, day, calls, prompt_tokens, completion_tokens)
VALUES ($1, $2, (now() AT TIME ZONE 'UTC')::date, $3, $4, $5)
ON CONFLICT (rule, model, day) DO UPDATE SET calls = u.calls + EXCLUDED.calls,
  prompt_tokens = u.prompt_tokens + EXCLUDED.prompt_tokens, completion_tokens = u.completion_tokens + EXCLUDED.completion_tokens`,
		o.Rule, o.Model, o.Calls, o.PromptTokens, o.CompletionTokens)
}
