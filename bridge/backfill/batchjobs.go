package backfill

// The batches of a rule's Batch API backfill at the provider — submitted,
// polled and downloaded (batch.go collects their input) — and the apply
// step's pages, each row with its answer.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/internal/reconn"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/state"
	"github.com/pgimageai/pgimageai/value"
)

// submit creates bt's batch unless it exists: a batch recorded without an ID
// by an earlier run (fresh is false) is first looked for by its input file —
// that run may have created it and stopped before recording its ID.
func (b *batchRun) submit(ctx context.Context, db *pgx.Conn, bt *state.BackfillBatch, fresh bool) error {
	if bt.Requests == 0 || bt.BatchID != "" || bt.Status == state.Refused {
		return nil
	}
	var job provider.BatchJob
	found := false
	if !fresh {
		var err error
		if job, found, err = b.api.FindBatch(ctx, bt.InputFileID); err != nil {
			return err
		}
	}
	if !found {
		var err error
		if job, err = b.api.CreateBatch(ctx, bt.InputFileID, map[string]string{"pgimageai_rule": b.r.Name,
			"pgimageai_seq": fmt.Sprint(bt.Seq)}); err != nil {
			return err // without an answer, the batch may have been made: the next try looks for it
		}
	}
	b.record(bt, job)
	if err := state.SaveBatch(ctx, db, *bt); err != nil {
		return err
	}
	b.log.Info("batch submitted", "rule", b.r.Name, "seq", bt.Seq, "batch", bt.BatchID, "requests", bt.Requests)
	return nil
}

func (b *batchRun) record(bt *state.BackfillBatch, job provider.BatchJob) {
	bt.BatchID, bt.Status, bt.Completed, bt.Failed = job.ID, job.Status, job.Completed, job.Failed
	bt.OutputFileID, bt.ErrorFileID = job.OutputFileID, job.ErrorFileID
}

// poll waits until bt's batch is final, recording each change of its state.
func (b *batchRun) poll(ctx context.Context, db *pgx.Conn, bt *state.BackfillBatch) error {
	limits := b.api.BatchLimits()
	wait := limits.PollMin
	if (provider.BatchJob{Status: bt.Status}).Final() || bt.Status == value.BatchNotFound {
		return nil // recorded before a restart, with its files
	}
	for {
		job, err := b.api.RetrieveBatch(ctx, bt.BatchID)
		if notFound(err) {
			// The provider no longer knows it: no answers; its rows get
			// synchronous calls.
			b.log.Warn("batch not found at the provider; its rows get synchronous calls", "rule", b.r.Name, "batch", bt.BatchID)
			bt.Status = value.BatchNotFound
			return state.SaveBatch(ctx, db, *bt)
		}
		if err != nil {
			if !provider.Retryable(err) {
				return fmt.Errorf("batch %s: %w", bt.BatchID, err)
			}
			b.log.Warn("batch: poll failed", "rule", b.r.Name, "batch", bt.BatchID, "err", err)
		} else {
			changed := job.Status != bt.Status || job.Completed != bt.Completed || job.Failed != bt.Failed
			b.record(bt, job)
			if changed {
				if err := state.SaveBatch(ctx, db, *bt); err != nil {
					return err
				}
			}
			if job.Final() {
				b.log.Info("batch finished", "rule", b.r.Name, "batch", bt.BatchID, "status", job.Status,
					"completed", job.Completed, "failed", job.Failed)
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, limits.PollMax)
	}
}

// download stores the answers of bt's output and error files. A line the
// synchronous call would retry, and a request the batch never ran (it
// expired or was cancelled), store nothing: the apply step calls for them.
func (b *batchRun) download(ctx context.Context, db *pgx.Conn, bt *state.BackfillBatch) error {
	var buf []state.BatchAnswer
	held := 0 // bytes of text in buf
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		err := state.SaveAnswers(ctx, db, b.r.Name, buf)
		buf, held = buf[:0], 0
		return err
	}
	answered, failed := 0, 0
	for _, file := range []string{bt.OutputFileID, bt.ErrorFileID} {
		if file == "" {
			continue
		}
		err := b.api.BatchAnswers(ctx, file, bt.Requests, func(a provider.BatchAnswer) error {
			input, key, ok := parseCustomID(a.CustomID)
			if !ok || a.Unanswered {
				return nil
			}
			row := state.BatchAnswer{Key: key, InputKey: input}
			if a.Err == nil {
				text := a.Completion.Text
				row.Answer = &text
				row.PromptTokens, row.CompletionTokens = a.Completion.Usage.PromptTokens, a.Completion.Usage.CompletionTokens
				answered++
			} else {
				row.Reason, row.Detail = string(functions.ProviderError), fmt.Sprintf("model %s: %v", b.r.Model, a.Err)
				var pe *provider.Error
				if errors.As(a.Err, &pe) {
					row.Status = pe.Status
					if pe.Kind == provider.BadResponse {
						row.Reason = string(functions.BadResponse)
					}
				}
				failed++
			}
			if row.Answer != nil {
				held += len(*row.Answer)
			}
			held += len(row.Detail)
			// Bounded by bytes too: up to batchPollers batches download at
			// once, beside the page being applied.
			if buf = append(buf, row); len(buf) >= batchAnswersPerSave || held >= batchAnswerBytes {
				return flush()
			}
			return nil
		})
		if notFound(err) { // the file is gone: its rows get synchronous calls
			b.log.Warn("batch file not found at the provider; its rows get synchronous calls", "rule", b.r.Name, "batch", bt.BatchID, "file", file)
			err = nil
		}
		if err == nil {
			err = flush()
		}
		if err != nil {
			return fmt.Errorf("batch %s: %w", bt.BatchID, err)
		}
	}
	bt.Downloaded = true
	if err := state.SaveBatch(ctx, db, *bt); err != nil {
		return err
	}
	// The requests the batch never ran get synchronous calls, which count
	// them again.
	if unanswered := bt.Requests - answered - failed; unanswered > 0 && b.budgets != nil {
		b.budgets.GiveBack(b.r.Model, b.r.Cap, unanswered, bt.Created)
	}
	b.log.Info("batch answers stored", "rule", b.r.Name, "batch", bt.BatchID, "status", bt.Status,
		"answers", answered, "failed", failed, "unanswered", bt.Requests-answered-failed)
	b.cleanup(ctx, *bt, false)
	return nil
}

// cleanup deletes a batch's files at the provider — the input file holds
// the images, the output file the answers — once its answers are stored,
// and, with cancel, cancels the batch first (a backfill that stopped before
// it finished). It is best effort: a failure is logged (once a minute per
// rule) and the files stay, as they would have before.
func (b *batchRun) cleanup(ctx context.Context, bt state.BackfillBatch, cancel bool) {
	if cancel && bt.BatchID != "" && !bt.Downloaded {
		if err := b.api.CancelBatch(ctx, bt.BatchID); err != nil && ctx.Err() == nil {
			rowLogs.Log(b.log, slog.LevelWarn, "cancel "+b.r.Name, "batch: cancelling a stopped backfill's batch failed", "rule", b.r.Name, "batch", bt.BatchID, "err", err)
		}
	}
	for _, file := range []string{bt.InputFileID, bt.OutputFileID, bt.ErrorFileID} {
		if file == "" {
			continue
		}
		if err := b.api.DeleteBatchFile(ctx, file); err != nil && ctx.Err() == nil {
			rowLogs.Log(b.log, slog.LevelWarn, "delete "+b.r.Name, "batch: deleting a file at the provider failed; it stays there", "rule", b.r.Name, "file", file, "err", err)
		}
	}
}

// answerPages is the Source of the apply step: the backfill's pages,
// each row with its batch answer.
type answerPages struct {
	Source
	conn *reconn.Conn
}

func (a *answerPages) read(ctx context.Context, r *rules.Rule, last, stop []byte) ([]Row, int, error) {
	rows, total, err := a.Source.read(ctx, r, last, stop)
	if err != nil {
		return nil, 0, err
	}
	var keys []string
	var idx []int
	for i, row := range rows {
		if row.Valid && !row.Over {
			keys = append(keys, string(row.KeyJSON))
			idx = append(idx, i)
		}
	}
	if len(keys) == 0 {
		return rows, total, nil
	}
	var answers []*state.BatchAnswer
	var covered int
	if err := a.conn.Do(ctx, func(conn *pgx.Conn) error {
		var err error
		answers, covered, err = state.LoadAnswers(ctx, conn, r.Name, keys, PageBytes)
		return err
	}); err != nil {
		return nil, 0, err
	}
	for j, i := range idx[:covered] {
		rows[i].Answer = answers[j]
	}
	if covered < len(idx) {
		// The answers held are bounded like a page's images: the page
		// ends before the first row whose answer was not held, and is
		// then not the last (fewer rows than total).
		rows = rows[:idx[covered]]
	}
	return rows, total, nil
}

func (a *answerPages) close(ctx context.Context) {
	a.Source.close(ctx)
	a.conn.Drop(ctx)
}
