// Package calls starts the function calls of the engine's items: it asks
// the cost control (bridge/cost: the byte budget, the stored inputs, the
// cache, the daily caps) before each, and runs them on their model's
// workers, at most the model's parallelism at once, in the order they were
// started. It also makes the finished call of a row that a batch API
// answered.
//
// It sits below bridge/engine, which calls Start and Answered from its
// goroutine; calls run on the workers' goroutines. Of the bridge it imports
// bridge/cost, bridge/work and bridge/rules; below it functions, provider,
// magic, state (usage), metrics and internal/circuit.
//
// Layer: parts.
package calls

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgimageai/pgimageai/bridge/cost"
	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/internal/circuit"
	"github.com/pgimageai/pgimageai/internal/supervise"
	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/metrics"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/state"
)

// callOverhead is what the byte budget charges for a call on top of twice its
// image bytes (the image, and the request that carries it): the goroutine and
// the answer, so that tiny images cannot make the number of calls in flight
// unbounded. The image bytes are released when the call ends; the overhead
// (Call.Held) when its item is written.
const callOverhead = 16 << 10

// Cost is the cost control asked before a call.
type Cost struct {
	Budget  *cost.Budget  // bytes of images and items in flight
	Cache   *cost.Cache   // identical work once
	Lookups *cost.Lookups // stored inputs; nil = not compared
	Daily   *cost.Daily   // the models' daily caps; nil = none
}

// Follower finds the call that a change at a busy row follows
// (apply.RowCounts.Pending).
type Follower interface {
	Pending(at *cost.Lookup, rule string, k work.Key) *work.Call
}

// Counters are the calls' counts. They are safe for concurrent use.
type Counters struct {
	Calls     atomic.Int64 // provider calls made
	Hits      atomic.Int64 // calls saved by the cache or an identical call in flight
	Unchanged atomic.Int64 // calls saved because the stored result had the same input
	Dropped   atomic.Int64 // calls of rules deleted, disabled or changed before they were sent
}

// Caller starts function calls. Start and Answered are called by the
// engine's goroutine; the calls run on the workers'.
type Caller struct {
	Cost
	workers workers // run the calls, per model
	metrics *metrics.Metrics
	rows    Follower
	breaker *circuit.Breaker // the models' circuits, by models.name; nil = none
	count   Counters
	live    atomic.Pointer[func(*rules.Rule) bool] // nil: every rule is live
}

// SetLive sets the check made before a queued call is sent: a call of a rule
// for which live is false (deleted, disabled or changed since the call was
// queued) is dropped — nothing is sent, nothing is billed, and its item
// writes nothing. It is safe to call at any time.
func (cl *Caller) SetLive(live func(*rules.Rule) bool) { cl.live.Store(&live) }

// isLive reports whether r's calls may still be sent.
func (cl *Caller) isLive(r *rules.Rule) bool {
	f := cl.live.Load()
	return f == nil || (*f)(r)
}

// New returns a Caller of c whose calls run on goroutines that sp starts
// (they finish the calls queued at sp's soft stop; its hard stop cancels
// them), following calls that rows finds.
func New(sp supervise.Spawner, c Cost, m *metrics.Metrics, rows Follower) *Caller {
	return &Caller{Cost: c, metrics: m, rows: rows, workers: workers{sp: sp}}
}

// SetBreaker sets the models' circuits (by models.name): a call of a model
// that is down is not made and its row parks (work.Parked), and a call's
// requests report to it. Set before the first Start.
func (cl *Caller) SetBreaker(b *circuit.Breaker) { cl.breaker = b }

// Counters returns the calls' counts.
func (cl *Caller) Counters() *Counters { return &cl.count }

// Start begins one function call. Images that need no provider (empty,
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
func (cl *Caller) Start(ctx context.Context, r *rules.Rule, look *cost.Lookup, img []byte, prompt string, fresh bool) (*work.Call, error) {
	return cl.start(ctx, r, look, img, prompt, fresh, false)
}

// Replay is Start for a parked row sent again. Its model answered since the
// row parked (or the call is its probe), so a row whose requests all fail
// while the model's circuit stays closed is the row's own failure: once
// its retries are spent it is a provider_error, not parked again — a row
// whose image makes the server fail never keeps itself, and its model,
// parked.
func (cl *Caller) Replay(ctx context.Context, r *rules.Rule, look *cost.Lookup, img []byte, prompt string) (*work.Call, error) {
	return cl.start(ctx, r, look, img, prompt, false, true)
}

func (cl *Caller) start(ctx context.Context, r *rules.Rule, look *cost.Lookup, img []byte, prompt string, fresh, replay bool) (*work.Call, error) {
	c := work.NewCall(len(img), magic.Head(img, 16))
	_, err := r.Fn.Check(img)
	if err == nil {
		err = r.Fn.CheckPrompt(prompt)
	}
	if err != nil {
		c.Result, c.Err = functions.Result{Null: true}, err
		close(c.Done)
		return c, nil
	}
	// The image is charged twice: its bytes, and the request that carries
	// it (base64, JSON) while the call runs; and what the provider holds in
	// this process to answer (the local provider decodes the image). The
	// prompt twice too: it is held, and copied into the request.
	imgCost := 2*int64(len(img)) + 2*int64(len(prompt)) + r.Fn.CallMemory(img)
	// The call's overhead is charged when its item is emitted (Held): a
	// change whose rules start several big calls must not wait, holding
	// overhead of its own, for budget that only its own items would free.
	if err := cl.Budget.Acquire(ctx, imgCost); err != nil {
		return nil, err
	}
	c.Held = callOverhead
	k := work.KeyFor(r, prompt, img)
	c.Key = &k
	if fresh {
		cl.Cache.Forget(k)
	}
	compare := !fresh && cl.Lookups != nil && look != nil && !look.Busy
	var prev *work.Call // at a busy row, the earlier change's call of the same input
	if !fresh && look != nil && look.Busy {
		prev = cl.rows.Pending(look, r.Name, k)
	}
	cl.workers.submit(r.ModelKey, r.Fn.Parallelism(), func(ctx context.Context) {
		defer cl.Budget.Release(imgCost)
		// prev was queued first on this model's workers: it runs or is done.
		if prev != nil && c.Follow(prev) {
			cl.count.Hits.Add(1)
			cl.metrics.CacheHit(r.Name)
			close(c.Done)
			return
		}
		if !cl.isLive(r) {
			c.Unchanged, c.Hit = true, true
			cl.count.Dropped.Add(1)
			close(c.Done)
			return
		}
		if compare && cl.Lookups.Same(ctx, r, look, k[:]) {
			c.Unchanged, c.Hit = true, true
			cl.count.Unchanged.Add(1)
			close(c.Done)
			return
		}
		c.Result, c.Hit, c.Err = cl.Cache.Do(ctx, k, func() (functions.Result, error) {
			permit := cl.breaker.Allow(r.Model)
			if permit == circuit.Park {
				cl.metrics.Call(r.Name, r.Model, outcomeParked, 0)
				return functions.Result{Null: true}, &work.Parked{Model: r.Model, Cause: cl.cause(r.Model)} // not cached
			}
			if err := cl.Daily.Reserve(r.Model, r.Cap); err != nil {
				if permit == circuit.Probe {
					cl.breaker.Report(r.Model, "", circuit.Unknown, "", true, 0, false)
				}
				return functions.Result{Null: true}, err // not cached: not permanent
			}
			cl.count.Calls.Add(1)
			res, err := cl.call(ctx, r, k, img, prompt, permit, replay)
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

// outcomeParked is the calls metric's outcome of a call whose row parked.
const outcomeParked = "parked"

// cause is what the last failed request of model said, while it is down.
func (cl *Caller) cause(model string) string {
	if cl.breaker == nil {
		return ""
	}
	for _, ep := range cl.breaker.Endpoints() {
		if ep.Name == model {
			return ep.Cause
		}
	}
	return ""
}

// call calls r's function at the provider, observing it for metrics, and
// reporting each of its requests to the model's circuit (permit is what
// the circuit allowed: a call, or its probe). A call whose requests found
// the model unreachable is given up at once when the circuit is open (or
// it was the probe): its row parks rather than spending its retries; one
// whose retries are spent parks too unless the model answered other rows
// meanwhile, or the row is a replay (see Replay): then it is the row's
// provider_error.
func (cl *Caller) call(ctx context.Context, r *rules.Rule, k work.Key, img []byte, prompt string, permit circuit.Permit, replay bool) (functions.Result, error) {
	tr := &provider.Trace{}
	if m := cl.metrics; m != nil {
		tr.Retry = func(int, error, time.Duration) { m.Retry(r.Model) }
	}
	var mark uint64
	// The attempt hook may run on several goroutines at once: a batching
	// provider sends the halves of a refused batch concurrently, each with
	// the context (and so the Trace) of the call that started the batch.
	var mu sync.Mutex
	reported := false // a request of the call was reported
	if br := cl.breaker; br != nil {
		mark = br.Mark(r.Model)
		since := mark // the answers when the request began (or its retry's wait)
		row := string(k[:])
		probe := permit == circuit.Probe
		tr.Attempt = func(err error) bool {
			mu.Lock()
			defer mu.Unlock()
			o := circuit.Answered
			switch {
			case err != nil && ctx.Err() != nil:
				o = circuit.Unknown
			case provider.Unreachable(err):
				o = circuit.Unreachable
			}
			cause := ""
			if err != nil {
				cause = err.Error()
			}
			st := br.Report(r.Model, row, o, cause, probe, since, replay)
			stop := probe || st == circuit.Down
			probe, reported, since = false, true, br.Mark(r.Model)
			return stop
		}
	}
	ctx = provider.WithTrace(ctx, tr)
	t0 := time.Now()
	res, err := r.Fn.CallPrompt(ctx, img, true, prompt)
	mu.Lock()
	done := reported
	mu.Unlock()
	if permit == circuit.Probe && !done {
		// A provider that made no request through a Retrier (or none at
		// all): the probe showed nothing; another goes soon.
		cl.breaker.Report(r.Model, "", circuit.Unknown, "", true, 0, false)
	}
	if err != nil && ctx.Err() == nil && cl.breaker != nil && provider.Unreachable(err) &&
		(permit == circuit.Probe || cl.breaker.State(r.Model) == circuit.Down || !replay && cl.breaker.Spent(r.Model, mark, err.Error())) {
		cl.metrics.Call(r.Name, r.Model, outcomeParked, time.Since(t0))
		return functions.Result{Null: true}, &work.Parked{Model: r.Model, Cause: err.Error(), Err: err}
	}
	outcome := "ok"
	switch {
	case err != nil && ctx.Err() != nil:
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

// Answered returns the finished call of a backfill row (its image and
// prompt) whose batch answer a is for the row's current input, or nil: the
// row is then handled like in any backfill. A row whose stored result already is of this input (the
// page applied again after a crash) writes nothing, so usage is not counted
// twice.
func (cl *Caller) Answered(r *rules.Rule, img []byte, prompt string, a *state.BatchAnswer, look *cost.Lookup) *work.Call {
	if a == nil {
		return nil
	}
	if _, err := r.Fn.Check(img); err != nil {
		return nil
	}
	k := work.KeyFor(r, prompt, img)
	if !bytes.Equal(a.InputKey, k[:]) {
		return nil // the row changed since it was asked about
	}
	c := work.NewCall(len(img), magic.Head(img, 16))
	c.Key, c.Held = &k, callOverhead
	if a.Answer != nil {
		c.Result = functions.Result{Text: *a.Answer, Usage: provider.Usage{PromptTokens: a.PromptTokens, CompletionTokens: a.CompletionTokens}}
		if cl.Daily != nil { // the call was counted when it went into the batch; its tokens now
			cl.Daily.Settle(r.Model, r.Cap, true, int64(a.PromptTokens+a.CompletionTokens))
		}
	} else {
		c.Result = functions.Result{Null: true}
		kind := provider.Permanent
		if a.Reason == string(functions.BadResponse) {
			kind = provider.BadResponse
		}
		c.Err = &functions.Error{Reason: functions.Reason(a.Reason), Detail: a.Detail, Status: a.Status,
			ImageBytes: len(img), ImageHead: c.Head, Err: &provider.Error{Kind: kind, Status: a.Status, Message: a.Detail}}
	}
	if cl.Lookups == nil || look == nil || a.Answer == nil {
		close(c.Done)
		return c
	}
	cl.workers.submit(r.ModelKey, r.Fn.Parallelism(), func(ctx context.Context) { // as the calls' comparisons are
		if cl.Lookups.Same(ctx, r, look, k[:]) {
			c.Unchanged, c.Hit = true, true
			c.Result = functions.Result{Null: true}
		}
		close(c.Done)
	})
	return c
}
