package backfill

// The collect step of a Batch API backfill (batch.go): the rows that need a
// call become the lines of a batch's input file, uploaded as they are
// written.

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

	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/internal/supervise"
	"github.com/pgimageai/pgimageai/state"
)

// collect reads source rows after `after` up to stop into the input file of
// batch seq, uploaded as it is written, and records the batch.
func (b *batchRun) collect(ctx context.Context, seq int, after, stop []byte) (state.BackfillBatch, error) {
	limits := b.api.BatchLimits()
	bt := state.BackfillBatch{Rule: b.r.Name, Seq: seq, Fingerprint: b.r.Fingerprint, Model: b.r.Model, LastKey: after, Status: "empty",
		Created: time.Now()}
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
	in, err := b.r.Fn.Prepare(ctx, row.Img)
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
	run := func(ctx context.Context) error {
		defer close(u.done)
		u.id, u.err = b.api.UploadBatch(ctx, fmt.Sprintf("pgimageai-%s-%d.jsonl", b.r.Name, seq), pr)
		pr.CloseWithError(errors.New("upload ended")) // a writer still writing stops
		return nil
	}
	// The leadership's spawner starts it (the upload is joined here too:
	// wait, result, abort); ctx ends it as it ends the batch's collection,
	// and so does the leadership's stop, soft or hard: the batch is
	// collected again by the next.
	supervise.OrNew(ctx).Go("batch upload "+b.r.Name, func(sctx context.Context) error {
		soft, cancelSoft := supervise.Soft(sctx)
		defer cancelSoft()
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(soft, cancel)()
		return run(ctx)
	})
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
