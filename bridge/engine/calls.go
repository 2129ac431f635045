package engine

import (
	"context"
	"time"

	"github.com/pgimageai/pgimageai/bridge/apply"
	"github.com/pgimageai/pgimageai/bridge/cost"
	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/metrics"
	"github.com/pgimageai/pgimageai/provider"
)

// caller starts function calls: it asks the cost control (the byte budget,
// the stored inputs, the cache, the daily caps) and runs the calls on their
// model's workers. start is called by the engine's goroutine; the calls run
// on the workers'.
type caller struct {
	Cost
	workers workers // run the calls, per model
	metrics *metrics.Metrics
	ctx     context.Context  // calls outlive a graceful stop's cancellation
	rows    *apply.RowCounts // items waiting per row, for calls that follow another
	count   *Counters
}

// start begins one function call. Images that need no provider (empty,
// unknown, too large, unsupported) finish at once without budget; the others
// wait for budget — which stops the engine reading: the stream's
// backpressure — and then run on their model's workers.
//
// fresh asks the provider even when the cache remembers a permanent failure
// of the same call (pgimageai retry).
//
// look, when set, is where the stored input is compared first (see
// cost.Lookups): a match makes no call; at a busy row, an earlier change of
// the same input still waiting makes none either: c follows its call.
func (cl *caller) start(ctx context.Context, r *rules.Rule, look *cost.Lookup, img []byte, prompt string, fresh bool) (*work.Call, error) {
	c := work.NewCall(len(img), magic.Head(img, 16))
	if _, err := r.Fn.Check(img); err != nil {
		c.Result, c.Err = functions.Result{Null: true}, err
		close(c.Done)
		return c, nil
	}
	// The image is charged twice: its bytes, and the request that carries
	// it (base64, JSON) while the call runs; and what the provider holds in
	// this process to answer (the local provider decodes the image).
	imgCost := 2*int64(len(img)) + r.Fn.CallMemory(img)
	// The call's overhead is charged when its item is emitted (Held): a
	// change whose rules start several big calls must not wait, holding
	// overhead of its own, for budget that only its own items would free.
	if err := cl.Budget.Acquire(ctx, imgCost); err != nil {
		return nil, err
	}
	c.Held = callOverhead
	k := work.KeyOf(r.Fn.Name(), r.ModelKey, prompt, img)
	c.Key = &k
	if fresh {
		cl.Cache.Forget(k)
	}
	compare := !fresh && cl.Lookups != nil && look != nil && !look.Busy
	var prev *work.Call // at a busy row, the earlier change's call of the same input
	if !fresh && look != nil && look.Busy {
		prev = cl.rows.Pending(look, r.Name, k)
	}
	cl.workers.submit(r.ModelKey, r.Fn.Parallelism(), func() {
		defer cl.Budget.Release(imgCost)
		// prev was queued first on this model's workers: it runs or is done.
		if prev != nil && c.Follow(prev) {
			cl.count.Hits.Add(1)
			cl.metrics.CacheHit(r.Name)
			close(c.Done)
			return
		}
		if compare && cl.Lookups.Same(cl.ctx, r, look, k[:]) {
			c.Unchanged, c.Hit = true, true
			cl.count.Unchanged.Add(1)
			close(c.Done)
			return
		}
		c.Result, c.Hit, c.Err = cl.Cache.Do(cl.ctx, k, func() (functions.Result, error) {
			if err := cl.Daily.Reserve(r.Model, r.Cap); err != nil {
				return functions.Result{Null: true}, err // not cached: not permanent
			}
			cl.count.Calls.Add(1)
			res, err := cl.call(r, img, prompt)
			cl.Daily.Settle(r.Model, r.Cap, err == nil, int64(res.Usage.PromptTokens+res.Usage.CompletionTokens))
			return res, err
		})
		if c.Hit {
			cl.count.Hits.Add(1)
			cl.metrics.CacheHit(r.Name)
		}
		close(c.Done)
	})
	return c, nil
}

// call calls r's function at the provider, observing it for metrics.
func (cl *caller) call(r *rules.Rule, img []byte, prompt string) (functions.Result, error) {
	ctx := cl.ctx
	if m := cl.metrics; m != nil {
		ctx = provider.WithTrace(ctx, &provider.Trace{Retry: func(int, error, time.Duration) { m.Retry(r.Model) }})
	}
	t0 := time.Now()
	res, err := r.Fn.CallPrompt(ctx, img, true, prompt)
	outcome := "ok"
	switch {
	case err != nil && cl.ctx.Err() != nil:
		outcome = "canceled"
	case err != nil:
		outcome = string(functions.ProviderError)
		if reason := functions.ReasonOf(err); reason != "" {
			outcome = string(reason)
		}
	}
	cl.metrics.Call(r.Name, r.Model, outcome, time.Since(t0))
	return res, err
}
