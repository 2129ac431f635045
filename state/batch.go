package state

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/value"
)

// BackfillBatch is a row of pgimageai.backfill_batches: one batch of a
// rule's backfill through a provider's Batch API.
type BackfillBatch struct {
	Rule        string
	Seq         int
	Fingerprint string
	Model       string // models.name its requests were counted against
	LastKey     []byte // the last source row its collection read; nil: none
	Final       bool   // the collection reached the stop key
	Requests    int
	Status      string    // "uploaded", then the provider's status, or Refused
	Created     time.Time // when it was recorded: the day its requests were counted
	BatchAtProvider
	BatchApplied
}

// BatchAtProvider is what the provider holds of a batch: its job, its
// files, how many requests it answered, and whether the answers are stored.
type BatchAtProvider struct {
	BatchID      string
	InputFileID  string
	OutputFileID string
	ErrorFileID  string
	Completed    int
	Failed       int
	Downloaded   bool // its answers are stored
}

// BatchApplied is how far the rows of a batch's range are applied:
// AppliedKey is the last row applied (nil: none yet); Applied, every row of
// its range. The sink writes them with the rows (BackfillProgress),
// SaveBatch never does.
type BatchApplied struct {
	AppliedKey []byte
	Applied    bool
}

// Refused is the status of a batch that the provider refused to take (its
// upload or its creation, for good): its rows get synchronous calls.
const Refused = value.BatchRefused

// LoadBatches returns the batches of rule's backfill, in order.
func LoadBatches(ctx context.Context, conn *pgx.Conn, rule string) ([]BackfillBatch, error) {
	rows, _ := conn.Query(ctx, `SELECT rule, seq, fingerprint, coalesce(model, ''), last_key::text, final, requests, coalesce(input_file_id, ''),
  coalesce(batch_id, ''), status, completed, failed, coalesce(output_file_id, ''), coalesce(error_file_id, ''), downloaded,
  applied_key::text, applied, created_at
FROM pgimageai.backfill_batches WHERE rule = $1 ORDER BY seq`, rule)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (BackfillBatch, error) {
		var b BackfillBatch
		var last, applied *string
		err := row.Scan(&b.Rule, &b.Seq, &b.Fingerprint, &b.Model, &last, &b.Final, &b.Requests, &b.InputFileID, &b.BatchID,
			&b.Status, &b.Completed, &b.Failed, &b.OutputFileID, &b.ErrorFileID, &b.Downloaded, &applied, &b.Applied, &b.Created)
		if last != nil {
			b.LastKey = []byte(*last)
		}
		if applied != nil {
			b.AppliedKey = []byte(*applied)
		}
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("batches of %s: %w", rule, err)
	}
	return out, nil
}

// SaveBatch records b (inserted or updated by rule and seq), but not how
// far its range was applied (BackfillProgress writes that).
func SaveBatch(ctx context.Context, conn *pgx.Conn, b BackfillBatch) error {
	var last any
	if b.LastKey != nil {
		last = string(b.LastKey)
	}
	empty := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	_, err := conn.Exec(ctx, `INSERT INTO pgimageai.backfill_batches AS b (rule, seq, fingerprint, last_key, final, requests,
  input_file_id, batch_id, status, completed, failed, output_file_id, error_file_id, downloaded, model)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
ON CONFLICT (rule, seq) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, last_key = EXCLUDED.last_key, final = EXCLUDED.final,
  requests = EXCLUDED.requests, input_file_id = EXCLUDED.input_file_id, batch_id = EXCLUDED.batch_id, status = EXCLUDED.status,
  completed = EXCLUDED.completed, failed = EXCLUDED.failed, output_file_id = EXCLUDED.output_file_id,
  error_file_id = EXCLUDED.error_file_id, downloaded = EXCLUDED.downloaded, model = EXCLUDED.model, updated_at = now()`,
		b.Rule, b.Seq, b.Fingerprint, last, b.Final, b.Requests, empty(b.InputFileID), empty(b.BatchID), b.Status,
		b.Completed, b.Failed, empty(b.OutputFileID), empty(b.ErrorFileID), b.Downloaded, empty(b.Model))
	if err != nil {
		return fmt.Errorf("record batch %d of %s: %w", b.Seq, b.Rule, err)
	}
	return nil
}

// ForgetBatches deletes the batches of rule's backfill and the answers
// downloaded for it: a new backfill starts over.
func ForgetBatches(ctx context.Context, conn *pgx.Conn, rule string) error {
	if _, err := conn.Exec(ctx, "DELETE FROM pgimageai.backfill_batches WHERE rule = $1", rule); err != nil {
		return fmt.Errorf("forget batches of %s: %w", rule, err)
	}
	return ForgetAnswers(ctx, conn, rule)
}

// ForgetAnswers deletes the batch answers of rule.
func ForgetAnswers(ctx context.Context, conn *pgx.Conn, rule string) error {
	if _, err := conn.Exec(ctx, "DELETE FROM pgimageai.batch_answers WHERE rule = $1", rule); err != nil {
		return fmt.Errorf("forget batch answers of %s: %w", rule, err)
	}
	return nil
}

// BatchAnswer is a row of pgimageai.batch_answers: what a batch answered
// for rule's row Key asked with input InputKey — Answer, or Reason and
// Detail.
type BatchAnswer struct {
	Key                            []byte // source_key JSON
	InputKey                       []byte
	Answer                         *string
	PromptTokens, CompletionTokens int
	Reason, Detail                 string
	Status                         int
}

// SaveAnswers records answers of rule in one transaction; an answer for a
// row that has one replaces it.
func SaveAnswers(ctx context.Context, conn *pgx.Conn, rule string, answers []BatchAnswer) error {
	b := &pgx.Batch{}
	for _, a := range answers {
		var reason, detail, status any
		if a.Answer == nil {
			reason, detail, status = a.Reason, a.Detail, a.Status
		}
		b.Queue(`INSERT INTO pgimageai.batch_answers (rule, source_key, input_key, answer, prompt_tokens, completion_tokens, reason, detail, status)
VALUES ($1, $2::jsonb, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (rule, source_key) DO UPDATE SET input_key = EXCLUDED.input_key, answer = EXCLUDED.answer,
  prompt_tokens = EXCLUDED.prompt_tokens, completion_tokens = EXCLUDED.completion_tokens, reason = EXCLUDED.reason,
  detail = EXCLUDED.detail, status = EXCLUDED.status`,
			rule, string(a.Key), a.InputKey, a.Answer, a.PromptTokens, a.CompletionTokens, reason, detail, status)
	}
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() })
	if err != nil {
		return fmt.Errorf("record batch answers of %s: %w", rule, err)
	}
	return nil
}

// LoadAnswers returns, for each source_key JSON of keys, rule's batch
// answer for that row, or nil — for the first covered keys only: it holds
// answers up to maxBytes of text (at least one), and the keys after the one
// that would pass it are not covered. The cut is made in the query (a
// running sum, as a backfill page's), so the answers past it are not sent:
// only the first one past it comes, without its text, to say where.
func LoadAnswers(ctx context.Context, conn *pgx.Conn, rule string, keys []string, maxBytes int) (out []*BatchAnswer, covered int, err error) {
	out = make([]*BatchAnswer, len(keys))
	covered = len(keys)
	rows, _ := conn.Query(ctx, `SELECT ord, input_key, CASE WHEN held THEN answer END, prompt_tokens, completion_tokens, reason,
  CASE WHEN held THEN detail ELSE '' END, status, held
FROM (
  SELECT h.*, lag(h.held, 1, true) OVER (ORDER BY h.ord) AS after_held
  FROM (
    SELECT a.*, a.before = 0 OR a.before + a.n <= $3 AS held
    FROM (
      SELECT k.ord, a.input_key, a.answer, a.prompt_tokens, a.completion_tokens, coalesce(a.reason, '') AS reason,
        coalesce(a.detail, '') AS detail, coalesce(a.status, 0) AS status, n.n,
        sum(n.n) OVER (ORDER BY k.ord ROWS UNBOUNDED PRECEDING) - n.n AS before
      FROM unnest($2::text[]) WITH ORDINALITY AS k(key, ord)
      JOIN pgimageai.batch_answers a ON a.rule = $1 AND a.source_key = k.key::jsonb
      CROSS JOIN LATERAL (SELECT coalesce(octet_length(a.answer), 0) + coalesce(octet_length(a.detail), 0) AS n) n
    ) a
  ) h
) h
WHERE held OR after_held
ORDER BY ord`, rule, keys, maxBytes)
	var ord int64
	var a BatchAnswer
	var held bool
	_, err = pgx.ForEachRow(rows, []any{&ord, &a.InputKey, &a.Answer, &a.PromptTokens, &a.CompletionTokens, &a.Reason, &a.Detail, &a.Status, &held},
		func() error {
			if !held { // the first past the bound: it and the keys after are not covered
				covered = min(covered, int(ord-1))
				return nil
			}
			c := a
			c.Key = []byte(keys[ord-1])
			c.InputKey = append([]byte(nil), a.InputKey...)
			out[ord-1] = &c
			return nil
		})
	if err != nil {
		return nil, 0, fmt.Errorf("batch answers of %s: %w", rule, err)
	}
	return out[:covered], covered, nil
}
