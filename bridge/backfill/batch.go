package backfill

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/bridge/work"
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
//     provider (a crash in between), never created twice.
//  2. poll each batch until it is final, then download its output and error
//     files into pgimageai.batch_answers: per row, the answer and the input
//     it answers (the custom_id is the input digest and the row's key).
//  3. apply: the ordinary backfill (pages.go) over the same rows, with
//     each page's answers attached. A row whose current input is the one
//     answered gets the answer, without a call; any other row is what a
//     backfill makes of it — a row changed since is left to the stream (the
//     version guard of the page's marker, and the stored input of its
//     streamed result), and a row the batch did not answer (it expired, a
//     line failed for a reason the synchronous call would retry) gets the
//     synchronous call.
//
// Live changes never use the Batch API.

// batchAnswersPerSave is how many answers one transaction stores.
const batchAnswersPerSave = 500

// Reserver counts a model's calls against its daily cap (cost.Daily): a
// batch request is a call when it goes into the file.
type Reserver interface {
	Reserve(model string, cap rules.DailyCap) error
	Settle(model string, cap rules.DailyCap, answered bool, tokens int64)
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

// batchRun is the collect and poll steps of one rule's batch backfill. It
// runs on the backfill worker's goroutine, with connections of its own.
// rowLogs holds per-row warnings of Batch API backfills to one line a rule
// and minute, with the count of the rest.
var rowLogs logsum.Sampled

type batchRun struct {
	log     *slog.Logger
	r       *rules.Rule
	api     provider.BatchAPI
	srcDSN  string
	budgets Reserver
	budget  Charger
	tgt     *reconn.Conn
	db      *pgx.Conn // tgt's connection, for one prepare
	src     *Pages
	// submitted: a batch of this backfill may exist at the provider (it
	// has an ID, or its creation may have happened). From then on a
	// refusal is no reason to call synchronously: that batch is paid for.
	submitted bool
}

// Batch runs r's backfill through its batch API (r.Fn.BatchAPI()): collect
// and poll, retried with backoff until they succeed or ctx ends, then w
// applies the answers page by page.
func Batch(ctx context.Context, log *slog.Logger, w *Worker, r *rules.Rule, last, stop []byte, d BatchDeps) {
	tgtDSN := d.TargetDSN
	b := &batchRun{log: log, r: r, api: r.Fn.BatchAPI(), srcDSN: d.SourceDSN, tgt: reconn.New("target", tgtDSN, nil),
		budgets: d.Daily, budget: d.Budget}
	defer b.close(context.WithoutCancel(ctx))
	bo := backoff.Backoff{Min: time.Second, Max: time.Minute}
	for {
		err := b.prepare(ctx, last, stop)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		b.close(ctx)
		if batchRefused(err) && !b.submitted {
			// The provider refuses for good (a key without access to the
			// Batch API, say): the synchronous calls give each row its
			// own outcome.
			log.Error("the batch API refused the backfill; the rows it did not answer get synchronous calls", "rule", r.Name, "err", err)
			break
		}
		if batchRefused(err) {
			log.Error("the batch API refused a request of a backfill whose batches it runs; retrying, not calling its rows again", "rule", r.Name, "err", err)
		} else {
			log.Warn("backfill through the batch API failed; retrying", "rule", r.Name, "err", err)
		}
		_ = bo.Sleep(ctx)
	}
	b.close(ctx)
	w.src = &answerPages{Source: w.src, conn: reconn.New("target", tgtDSN, nil)}
	w.Work(ctx, r, last, stop) // its last page deletes the answers (state.BackfillProgress)
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

// prepare collects and submits what is not submitted yet, then polls and
// downloads every batch of the backfill.
func (b *batchRun) prepare(ctx context.Context, last, stop []byte) error {
	var err error
	if b.db, err = b.tgt.Get(ctx); err != nil {
		return err
	}
	b.src = NewPages(b.srcDSN, "")
	batches, err := state.LoadBatches(ctx, b.db, b.r.Name)
	if err != nil {
		return err
	}
	for _, bt := range batches {
		if bt.Fingerprint == b.r.Fingerprint && bt.BatchID != "" { // one recorded without an ID is looked for (submit)
			b.submitted = true
		}
	}
	for _, bt := range batches {
		if bt.Fingerprint != b.r.Fingerprint { // of an earlier backfill
			// The rule changed since: its batches are of no use; they are
			// cancelled and their files deleted at the provider.
			for _, old := range batches {
				b.cleanup(ctx, old, true)
			}
			if err := state.ForgetBatches(ctx, b.db, b.r.Name); err != nil {
				return err
			}
			batches = nil
			break
		}
	}
	for len(batches) == 0 || !batches[len(batches)-1].Final {
		after := last
		if len(batches) > 0 {
			after = batches[len(batches)-1].LastKey
		}
		bt, err := b.collect(ctx, len(batches)+1, after, stop)
		if err != nil {
			return err
		}
		batches = append(batches, bt)
		if err := b.submit(ctx, &batches[len(batches)-1], true); err != nil {
			return err
		}
	}
	for i := range batches {
		bt := &batches[i]
		if bt.Requests == 0 || bt.Downloaded {
			continue
		}
		if err := b.submit(ctx, bt, false); err != nil {
			return err
		}
		if err := b.poll(ctx, bt); err != nil {
			return err
		}
		if err := b.download(ctx, bt); err != nil {
			return err
		}
	}
	return nil
}

// collect reads source rows after `after` up to stop into the input file of
// batch seq, uploaded as it is written, and records the batch.
func (b *batchRun) collect(ctx context.Context, seq int, after, stop []byte) (state.BackfillBatch, error) {
	limits := b.api.BatchLimits()
	bt := state.BackfillBatch{Rule: b.r.Name, Seq: seq, Fingerprint: b.r.Fingerprint, LastKey: after, Status: "empty"}
	var up *upload
	defer func() {
		if up != nil {
			up.abort()
		}
	}()
	var size int64
	cursor := after
	full := false
	// The model's daily budget counts a request when it goes into the
	// file; a collect that fails gives its requests back (it is collected
	// again). A row over the budget gets no request: the apply step gives
	// it its budget_exhausted errors row.
	reserved, saved := 0, false
	defer func() {
		if !saved {
			for range reserved {
				b.budgets.Settle(b.r.Model, b.r.Cap, false, 0)
			}
		}
	}()
	for !full {
		rows, total, err := b.src.read(ctx, b.r, cursor, stop)
		if err != nil {
			return bt, err
		}
		lines, err := b.lines(ctx, rows)
		if err != nil {
			return bt, err
		}
		for i, row := range rows {
			if line := lines[i]; line != nil {
				n := int64(len(line)) + 1
				if bt.Requests+1 > limits.MaxRequests || size+n > limits.MaxBytes {
					if bt.Requests > 0 {
						full = true
						break
					}
					rowLogs.Log(b.log, slog.LevelWarn, "large "+b.r.Name, "batch: a request larger than batch_max_bytes; the row gets the synchronous call", "rule", b.r.Name, "bytes", n)
				} else if b.budgets != nil && b.budgets.Reserve(b.r.Model, b.r.Cap) != nil {
					// over the daily budget: no request
				} else {
					if b.budgets != nil {
						reserved++
					}
					if up == nil {
						up = b.startUpload(ctx, seq)
					}
					_, err := up.w.Write(line)
					if err == nil {
						_, err = up.w.Write(newline)
					}
					if err != nil {
						return bt, fmt.Errorf("upload batch input: %w", up.wait(err))
					}
					bt.Requests++
					size += n
				}
			}
			cursor = row.KeyJSON
		}
		if !full && (len(rows) == 0 || (total < PageRows && len(rows) == total)) {
			bt.Final = true
			break
		}
	}
	bt.LastKey = cursor
	if up != nil {
		up.w.Close()
		id, err := up.result()
		up = nil
		if err != nil {
			return bt, fmt.Errorf("upload batch input: %w", err)
		}
		bt.InputFileID, bt.Status = id, "uploaded"
	}
	if err := state.SaveBatch(ctx, b.db, bt); err != nil {
		return bt, err
	}
	saved = true
	b.log.Info("batch input uploaded", "rule", b.r.Name, "seq", seq, "requests", bt.Requests, "bytes", size,
		"file", bt.InputFileID, "final", bt.Final)
	return bt, nil
}

// lines returns the batch request of each row that needs a call; nil for
// the others. Rows whose stored result is of the same input are left to the
// apply step, which makes no call for them.
func (b *batchRun) lines(ctx context.Context, rows []Row) ([][]byte, error) {
	out := make([][]byte, len(rows))
	var keys []string
	var idx []int
	inputs := make([]work.Key, len(rows))
	for i, row := range rows {
		if !row.Valid || row.Over {
			continue
		}
		if _, err := b.r.Fn.Check(row.Img); err != nil {
			continue
		}
		inputs[i] = work.KeyFor(b.r, row.Prompt, row.Img)
		keys = append(keys, string(row.KeyJSON))
		idx = append(idx, i)
	}
	if len(keys) == 0 {
		return out, nil
	}
	stored, err := state.StoredInputs(ctx, b.db, b.r.Name, keys)
	if err != nil {
		return nil, err
	}
	for j, i := range idx {
		row := rows[i]
		if bytes.Equal(stored[j], inputs[i][:]) {
			continue
		}
		// What the synchronous call would send: checked and normalised for
		// the model (upright, scaled, converted, without metadata). The
		// normalisation's memory is charged to the byte budget like a
		// call's: a page of HEIC photos must not hold hundreds of MiB
		// outside it.
		line, err := b.line(ctx, inputs[i], row)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			rowLogs.Log(b.log, slog.LevelWarn, "line "+b.r.Name, "batch: a row gets the synchronous call", "rule", b.r.Name, "err", err)
			continue
		}
		out[i] = line
	}
	return out, nil
}

// line returns the batch request of row, whose input is input; an image
// that does not prepare (the synchronous call records its error) has none.
func (b *batchRun) line(ctx context.Context, input work.Key, row Row) ([]byte, error) {
	if b.budget != nil {
		n := b.r.Fn.CallMemory(row.Img)
		if err := b.budget.Acquire(ctx, n); err != nil {
			return nil, err
		}
		defer b.budget.Release(n)
	}
	in, err := b.r.Fn.Prepare(row.Img)
	if err != nil {
		return nil, nil
	}
	return b.api.BatchLine(customID(input, row.KeyJSON), in, row.Prompt)
}

var newline = []byte{'\n'}

// customID names a row's request: the input digest and the row's key.
func customID(input work.Key, keyJSON []byte) string {
	return hex.EncodeToString(input[:]) + "/" + string(keyJSON)
}

// parseCustomID is the inverse of customID.
func parseCustomID(id string) (input, keyJSON []byte, ok bool) {
	h, k, ok := strings.Cut(id, "/")
	if !ok {
		return nil, nil, false
	}
	input, err := hex.DecodeString(h)
	if err != nil || len(input) != len(work.Key{}) || !json.Valid([]byte(k)) {
		return nil, nil, false
	}
	return input, []byte(k), true
}

// upload is an input file being uploaded: lines written to w reach the
// provider as they are written.
type upload struct {
	w    *io.PipeWriter
	done chan struct{}
	id   string
	err  error
}

func (b *batchRun) startUpload(ctx context.Context, seq int) *upload {
	pr, pw := io.Pipe()
	u := &upload{w: pw, done: make(chan struct{})}
	go func() {
		defer close(u.done)
		u.id, u.err = b.api.UploadBatch(ctx, fmt.Sprintf("pgimageai-%s-%d.jsonl", b.r.Name, seq), pr)
		pr.CloseWithError(errors.New("upload ended")) // a writer still writing stops
	}()
	return u
}

// wait returns the upload's error when it ended, else err.
func (u *upload) wait(err error) error {
	u.w.CloseWithError(err)
	<-u.done
	if u.err != nil {
		return u.err
	}
	return err
}

func (u *upload) result() (string, error) {
	<-u.done
	return u.id, u.err
}

func (u *upload) abort() {
	u.w.CloseWithError(errors.New("collection failed"))
	<-u.done
}
