package backfill

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/internal/backoff"
	"github.com/pgimageai/pgimageai/internal/logsum"
	"github.com/pgimageai/pgimageai/internal/reconn"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/state"
)

// A backfill of a rule whose model has batch_api: true goes through the
// provider's Batch API (half the price), in three steps, each of
// which a restart resumes where it stopped, from pgimageai.backfill_batches:
//
//  1. collect: read the rule's source rows in keyset pages, as a backfill
//     does, and write one request per row that needs a call — not the NULL,
//     empty, unknown or too large images, nor the rows whose stored result
//     was computed from the same input (pgimageai.results) — to the input
//     file of a batch, streamed to the provider as it is read; a batch holds
//     at most the model's batch_max_requests and batch_max_bytes, and the
//     next one goes on after its last row. Each batch is recorded, then
//     created; a batch recorded but not created is first looked for at the
//     provider (a crash in between), never created twice. A provider that
//     refuses a batch for good (its upload or its creation) ends the
//     collection: that batch is recorded as refused, its range running to
//     the end of the backfill, and its rows get synchronous calls.
//  2. poll every batch until it is final — up to batchPollers at once —
//     then download its output and error files into
//     pgimageai.batch_answers: per row, the answer and the input it answers
//     (the custom_id is the input digest and the row's key).
//  3. apply each batch's range of rows as soon as its answers are stored,
//     whatever the order the batches finish in (one range at a time): the
//     ordinary backfill pages (pages.go) over the range, with each page's
//     answers attached. A row whose current input is the one answered gets
//     the answer, without a call; any other row is what a backfill makes of
//     it — a row changed since is left to the stream (the version guard of
//     the page's marker, and the stored input of its streamed result), and
//     a row the batch did not answer (it expired, a line failed for a reason
//     the synchronous call would retry, it was refused) gets the
//     synchronous call. A range's pages record how far it got in its batch
//     (applied_key, applied), in the transaction of their rows; once every
//     range is applied, one empty page marks the backfill done.
//
// Live changes never use the Batch API.

// batchAnswersPerSave is how many answers one transaction stores, at most;
// batchAnswerBytes, how many bytes of their text (beyond the first).
const (
	batchAnswersPerSave = 500
	batchAnswerBytes    = 4 << 20
)

// batchPollers is how many batches of one backfill are polled and
// downloaded at once.
const batchPollers = 4

// Reserver counts a model's calls against its daily cap (cost.Daily): a
// batch request is a call when it goes into the file.
type Reserver interface {
	Reserve(model string, cap rules.DailyCap) error
	Settle(model string, cap rules.DailyCap, answered bool, tokens int64)
	// GiveBack gives back n calls reserved at reserved (requests of a
	// batch that got no answer, or that was refused).
	GiveBack(model string, cap rules.DailyCap, n int, reserved time.Time)
}

// Charger bounds the memory a batch's collect holds beyond its page
// (cost.Budget): the normalisation of an image, charged while it runs.
type Charger interface {
	Acquire(ctx context.Context, n int64) error
	Release(n int64)
}

// BatchDeps is what a batch backfill reaches beside its rule: the
// databases, the model's daily cap (nil: not counted) and the byte budget
// (nil: not charged).
type BatchDeps struct {
	SourceDSN, TargetDSN string
	Daily                Reserver
	Budget               Charger
}

// rowLogs holds per-row warnings of Batch API backfills to one line a rule
// and minute, with the count of the rest.
var rowLogs logsum.Sampled

// batchRun is one rule's batch backfill. Its collect step runs on the
// backfill worker's goroutine with the connection db; the batches are then
// polled, downloaded and applied on goroutines of their own, each with
// connections of its own. Its fields are read-only after Batch set them.
type batchRun struct {
	log     *slog.Logger
	r       *rules.Rule
	api     provider.BatchAPI
	srcDSN  string
	tgtDSN  string
	budgets Reserver
	budget  Charger
	tgt     *reconn.Conn
	db      *pgx.Conn // tgt's connection, for the collect step
	src     *Pages
}

// Batch runs r's backfill through its batch API (r.Fn.BatchAPI()): collect
// and submit, retried with backoff until they succeed or ctx ends; then the
// batches are polled, and each batch's range applied by a worker of w's run
// as soon as its answers are stored; then w marks the backfill done.
func Batch(ctx context.Context, log *slog.Logger, w *Worker, r *rules.Rule, last, stop []byte, d BatchDeps) {
	b := &batchRun{log: log, r: r, api: r.Fn.BatchAPI(), srcDSN: d.SourceDSN, tgtDSN: d.TargetDSN, tgt: reconn.New("target", d.TargetDSN, nil),
		budgets: d.Daily, budget: d.Budget}
	defer b.close(context.WithoutCancel(ctx))
	bo := backoff.Backoff{Min: time.Second, Max: time.Minute}
	var batches []state.BackfillBatch
	for {
		var err error
		if batches, err = b.prepare(ctx, last, stop); err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		b.close(ctx)
		log.Warn("backfill through the batch API failed; retrying", "rule", r.Name, "err", err)
		_ = bo.Sleep(ctx)
	}
	b.close(ctx)
	if !b.runAll(ctx, w, batches, last, stop) {
		return
	}
	w.Work(ctx, r, stop, stop) // one empty page: done (state.BackfillProgress deletes the answers)
}

// runAll polls and downloads the batches not applied yet, up to
// batchPollers at once, and applies each one's range as soon as its answers
// are stored, one range at a time. It reports whether every range was
// applied (false: ctx ended first).
func (b *batchRun) runAll(ctx context.Context, w *Worker, batches []state.BackfillBatch, last, stop []byte) bool {
	pollers := make(chan struct{}, batchPollers)
	var applying sync.Mutex
	var wg sync.WaitGroup
	for i, bt := range batches {
		if bt.Applied {
			continue
		}
		from, to := last, stop
		if i > 0 {
			from = batches[i-1].LastKey
		}
		if !bt.Final {
			to = bt.LastKey
		}
		if bt.AppliedKey != nil {
			from = bt.AppliedKey
		}
		wg.Go(func() {
			select {
			case pollers <- struct{}{}:
			case <-ctx.Done():
				return
			}
			ok := b.await(ctx, &bt)
			<-pollers
			if !ok {
				return
			}
			applying.Lock()
			defer applying.Unlock()
			if ctx.Err() != nil {
				return
			}
			b.log.Info("batch: applying its rows", "rule", b.r.Name, "seq", bt.Seq, "batch", bt.BatchID, "status", bt.Status)
			src := &answerPages{Source: NewPages(b.srcDSN, b.tgtDSN), conn: reconn.New("target", b.tgtDSN, nil)}
			w.forPart(bt.Seq, src).Work(ctx, b.r, from, to)
		})
	}
	wg.Wait()
	return ctx.Err() == nil
}

// await polls bt's batch until it is final and stores its answers, on a
// connection of its own, retried with backoff until that succeeds or ctx
// ends (false).
func (b *batchRun) await(ctx context.Context, bt *state.BackfillBatch) bool {
	if bt.Requests == 0 || bt.Downloaded || bt.Status == state.Refused {
		return ctx.Err() == nil
	}
	conn := reconn.New("target", b.tgtDSN, nil)
	defer conn.Drop(context.WithoutCancel(ctx))
	bo := backoff.Backoff{Min: time.Second, Max: time.Minute}
	for {
		err := conn.Do(ctx, func(db *pgx.Conn) error {
			if err := b.submit(ctx, db, bt, false); err != nil {
				return err
			}
			if err := b.poll(ctx, db, bt); err != nil {
				return err
			}
			return b.download(ctx, db, bt)
		})
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		b.log.Warn("batch: polling or storing its answers failed; retrying", "rule", b.r.Name, "seq", bt.Seq, "batch", bt.BatchID, "err", err)
		_ = bo.Sleep(ctx)
	}
}

// batchRefused reports whether err is the provider's permanent refusal.
func batchRefused(err error) bool {
	var pe *provider.Error
	return errors.As(err, &pe) && pe.Kind != provider.Transient
}

// notFound reports whether err is the provider's 404.
func notFound(err error) bool {
	var pe *provider.Error
	return errors.As(err, &pe) && pe.Status == 404
}

func (b *batchRun) close(ctx context.Context) {
	b.tgt.Drop(ctx)
	if b.src != nil {
		b.src.close(ctx)
		b.src = nil
	}
}

// prepare collects and submits what is not submitted yet, and returns every
// batch of the backfill.
func (b *batchRun) prepare(ctx context.Context, last, stop []byte) ([]state.BackfillBatch, error) {
	var err error
	if b.db, err = b.tgt.Get(ctx); err != nil {
		return nil, err
	}
	b.src = NewPages(b.srcDSN, "")
	batches, err := state.LoadBatches(ctx, b.db, b.r.Name)
	if err != nil {
		return nil, err
	}
	for _, bt := range batches {
		if bt.Fingerprint != b.r.Fingerprint { // of an earlier backfill
			// The rule changed since: its batches are of no use; they are
			// cancelled and their files deleted at the provider.
			for _, old := range batches {
				b.cleanup(ctx, old, true)
			}
			if err := state.ForgetBatches(ctx, b.db, b.r.Name); err != nil {
				return nil, err
			}
			batches = nil
			break
		}
	}
	// A batch recorded without an ID by an earlier run is looked for first:
	// that run may have created it.
	for i := range batches {
		if err := b.create(ctx, batches, i, false, stop); err != nil {
			return nil, err
		}
	}
	for len(batches) == 0 || !batches[len(batches)-1].Final {
		after := last
		if len(batches) > 0 {
			after = batches[len(batches)-1].LastKey
		}
		bt, err := b.collect(ctx, len(batches)+1, after, stop)
		if batchRefused(err) {
			bt = state.BackfillBatch{Rule: b.r.Name, Seq: len(batches) + 1, Fingerprint: b.r.Fingerprint, Model: b.r.Model, LastKey: after}
			batches = append(batches, bt)
			if err := b.refuse(ctx, batches, len(batches)-1, stop, err); err != nil {
				return nil, err
			}
			break
		}
		if err != nil {
			return nil, err
		}
		batches = append(batches, bt)
		if err := b.create(ctx, batches, len(batches)-1, true, stop); err != nil {
			return nil, err
		}
	}
	return batches, nil
}

// create creates batches[i] unless it exists (fresh: it was just
// collected, nobody created it). A refusal for good makes it refused.
func (b *batchRun) create(ctx context.Context, batches []state.BackfillBatch, i int, fresh bool, stop []byte) error {
	err := b.submit(ctx, b.db, &batches[i], fresh)
	if batchRefused(err) {
		return b.refuse(ctx, batches, i, stop, err)
	}
	return err
}

// refuse records batches[i] as refused by the provider for good: its
// requests go back to the daily budget, its input file is deleted, and its
// rows get synchronous calls when its range is applied. The last batch's
// range then runs to stop: no more batches are collected, as the provider
// would most likely refuse them too, and the other batches go on.
func (b *batchRun) refuse(ctx context.Context, batches []state.BackfillBatch, i int, stop []byte, why error) error {
	bt := &batches[i]
	b.log.Error("the batch API refused a batch; its rows get synchronous calls", "rule", b.r.Name, "seq", bt.Seq,
		"requests", bt.Requests, "err", why)
	if b.budgets != nil && bt.Requests > 0 {
		b.budgets.GiveBack(b.r.Model, b.r.Cap, bt.Requests, bt.Created)
	}
	if bt.InputFileID != "" {
		b.cleanup(ctx, *bt, false)
	}
	bt.Status, bt.BatchID = state.Refused, ""
	if i == len(batches)-1 {
		bt.LastKey, bt.Final = stop, true
	}
	return state.SaveBatch(ctx, b.db, *bt)
}
