package backfill

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/internal/backoff"
	"github.com/pgimageai/pgimageai/internal/reconn"
	"github.com/pgimageai/pgimageai/internal/supervise"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/state"
	"github.com/pgimageai/pgimageai/value"
)

// Cleaner cancels the batches of given-up Batch API backfills — of a rule
// deleted, disabled or changed, or whose target table was made again — and
// deletes their files at the provider: the rows of pgimageai.batch_cleanup,
// which outlive a restart. It runs on a goroutine of its own, one run at a
// time, until every row is done, retrying with backoff (a batch being
// cancelled becomes final within minutes; its output files are deleted
// then). It is safe for concurrent use.
type Cleaner struct {
	sp     supervise.Spawner // starts the runs
	log    *slog.Logger
	tgtDSN string
	retry  backoff.Backoff

	mu      sync.Mutex
	running bool
	last    map[string]provider.BatchAPI // the APIs of the last Start
	next    map[string]provider.BatchAPI // the APIs of the run asked for while one ran; nil: none
}

// NewCleaner returns the Cleaner of the target database tgtDSN, whose runs
// sp starts; a run ends at sp's soft stop.
func NewCleaner(sp supervise.Spawner, log *slog.Logger, tgtDSN string) *Cleaner {
	return &Cleaner{sp: sp, log: log, tgtDSN: tgtDSN, retry: backoff.Backoff{Min: 2 * time.Second, Max: time.Minute}}
}

// Start cleans up with apis, the batch APIs by models.name (of
// the models with batch_api; nil: those of the last Start), unless a run is
// under way: that one then goes on with apis. A nil Cleaner does nothing.
func (c *Cleaner) Start(apis map[string]provider.BatchAPI) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if apis == nil {
		apis = c.last
	}
	if apis == nil {
		apis = map[string]provider.BatchAPI{}
	}
	c.last = apis
	if c.running {
		c.next = apis
		return
	}
	c.running = true
	c.sp.Go("batch cleanup", func(ctx context.Context) error {
		ctx, cancel := supervise.Soft(ctx)
		defer cancel()
		c.loop(ctx, apis)
		return nil
	})
}

func (c *Cleaner) loop(ctx context.Context, apis map[string]provider.BatchAPI) {
	bo := c.retry
	conn := reconn.New("target", c.tgtDSN, nil)
	defer conn.Drop(context.WithoutCancel(ctx))
	for {
		left := c.run(ctx, conn, apis)
		c.mu.Lock()
		if c.next != nil {
			apis, c.next = c.next, nil
			bo.Reset()
		} else if left == 0 || ctx.Err() != nil {
			c.running = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		if left > 0 {
			_ = bo.Sleep(ctx)
		}
	}
}

// run cleans up every row of pgimageai.batch_cleanup once and returns how
// many are left.
func (c *Cleaner) run(ctx context.Context, conn *reconn.Conn, apis map[string]provider.BatchAPI) (left int) {
	var todo []state.BatchCleanup
	if err := conn.Do(ctx, func(db *pgx.Conn) error {
		var err error
		todo, err = state.BatchCleanups(ctx, db)
		return err
	}); err != nil {
		if ctx.Err() == nil {
			c.log.Warn("batch cleanup: reading what to clean up failed; retrying", "err", err)
		}
		return 1
	}
	for _, bc := range todo {
		done, err := cleanUp(ctx, c.log, apis[bc.Model], bc)
		if err == nil && done {
			err = conn.Do(ctx, func(db *pgx.Conn) error { return state.CleanedUp(ctx, db, bc.ID) })
		}
		if err != nil || !done {
			if err != nil && ctx.Err() == nil {
				rowLogs.Log(c.log, slog.LevelWarn, "cleanup "+bc.Rule, "batch cleanup: cancelling a given-up batch or deleting its files failed; retrying",
					"rule", bc.Rule, "batch", bc.BatchID, "err", err)
			}
			left++
		}
	}
	return left
}

// cleanUp cancels bc's batch at api and, once it is final, deletes its
// files; done is false while the provider is still cancelling it. Without
// an api (the model was deleted, or its batch_api turned off), nothing can
// be asked: the batch is left to the operator, with a warning.
func cleanUp(ctx context.Context, log *slog.Logger, api provider.BatchAPI, bc state.BatchCleanup) (done bool, err error) {
	if api == nil {
		log.Warn("batch cleanup: the model of a given-up batch is gone or has batch_api off; cancel the batch and delete its files at the provider yourself",
			"rule", bc.Rule, "model", bc.Model, "batch", bc.BatchID, "files", bc.Files)
		return true, nil
	}
	id := bc.BatchID
	if id == "" && bc.InputFileID != "" { // it may have been created without its ID recorded
		job, found, err := api.FindBatch(ctx, bc.InputFileID)
		if err != nil {
			return false, err
		}
		if found {
			id = job.ID
		}
	}
	files := bc.Files
	if id != "" {
		job, err := api.RetrieveBatch(ctx, id)
		switch {
		case notFound(err): // gone already
		case err != nil:
			return false, err
		case !job.Final():
			if job.Status != value.BatchCancelling {
				if err := api.CancelBatch(ctx, id); err != nil && !notFound(err) {
					return false, err
				}
				log.Info("batch of a given-up backfill cancelled", "rule", bc.Rule, "batch", id)
			}
			return false, nil // its files once it is final: a cancelled batch may still write some
		default:
			files = append(files, job.OutputFileID, job.ErrorFileID)
		}
	}
	for _, f := range files {
		if f == "" {
			continue
		}
		if err := api.DeleteBatchFile(ctx, f); err != nil && !notFound(err) {
			return false, err
		}
	}
	log.Info("files of a given-up batch deleted at the provider", "rule", bc.Rule, "batch", id, "files", len(files))
	return true, nil
}
