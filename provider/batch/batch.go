package batch

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/pgimageai/pgimageai/provider"
)

// DefaultWait is how long the first call of a batch waits for others when
// batch_wait is not set.
const DefaultWait = 20 * time.Millisecond

// Func sends one batch: it returns one result per input, in input order, or
// the error of the whole request.
type Func[In, Out any] func(ctx context.Context, in []In) ([]Out, error)

// Batcher collects calls from concurrent goroutines into batches of at most
// size inputs, sent by one call of its Func once the batch is full or the
// first call of the batch has waited wait. It is safe for concurrent use.
//
// A caller whose ctx ends gets a Transient *provider.Error wrapping ctx's
// error at once; the batch goes on for the
// others. An input whose caller left before the batch was sent is not sent; a
// batch whose callers all left is cancelled.
//
// A batch that fails with an error that SplitOn's predicate accepts (an
// input the provider refuses, which fails the whole request) is split in
// halves that are sent again, down to single inputs: one bad input costs
// its own row and about 2·log2(size) extra requests, not the batch. With
// Weigh, a batch is also closed before its inputs' total weight (estimated
// tokens) would pass a limit.
type Batcher[In, Out any] struct {
	size int
	wait time.Duration
	send Func[In, Out]

	split     func(error) bool // nil = never split
	weigh     func(In) int     // nil = every input weighs 0
	maxWeight int

	mu   sync.Mutex
	open *group[In, Out] // the batch still taking calls; nil = none
}

// group is one batch. Its fields are guarded by the Batcher's mu until done
// is closed; after that, out and err are read-only.
type group[In, Out any] struct {
	calls  []*call[In, Out]
	live   int                // callers still waiting
	weight int                // of the calls' inputs
	cancel context.CancelFunc // of the send; nil = not sent yet
	done   chan struct{}
}

// call is one caller's input and result. out and err are written by the
// group's run before done is closed.
type call[In, Out any] struct {
	in    In
	out   Out
	err   error
	gone  bool            // the caller left
	trace *provider.Trace // of the caller's context, if any
}

// New returns a Batcher sending batches of up to size inputs through send.
// size <= 1 sends every call on its own, on the caller's goroutine and
// context; wait <= 0 means DefaultWait.
func New[In, Out any](size int, wait time.Duration, send Func[In, Out]) *Batcher[In, Out] {
	if wait <= 0 {
		wait = DefaultWait
	}
	return &Batcher[In, Out]{size: max(size, 1), wait: wait, send: send}
}

// Size returns the largest batch sent.
func (b *Batcher[In, Out]) Size() int { return b.size }

// SplitOn makes a batch that failed with an error for which splittable
// returns true be sent again in halves, recursively, so that the inputs that
// caused it fail alone. Call it before the first Do; it returns b.
func (b *Batcher[In, Out]) SplitOn(splittable func(error) bool) *Batcher[In, Out] {
	b.split = splittable
	return b
}

// Weigh bounds the total weight of a batch's inputs by limit: an input that
// would take the open batch past it sends that batch and starts the next
// one. An input heavier than limit on its own is sent alone. Call it before
// the first Do; it returns b.
func (b *Batcher[In, Out]) Weigh(weight func(In) int, limit int) *Batcher[In, Out] {
	b.weigh, b.maxWeight = weight, limit
	return b
}

// Do adds in to the open batch and waits for its result. The error is the
// batch's, or ctx's when ctx ended first.
func (b *Batcher[In, Out]) Do(ctx context.Context, in In) (Out, error) {
	var zero Out
	if b.size == 1 {
		out, err := b.send(ctx, []In{in})
		if err != nil {
			return zero, err
		}
		if len(out) != 1 {
			return zero, mismatch(len(out), 1)
		}
		return out[0], nil
	}
	if err := ctx.Err(); err != nil {
		return zero, stopped(err)
	}

	c := &call[In, Out]{in: in, trace: provider.ContextTrace(ctx)}
	w := 0
	if b.weigh != nil {
		w = b.weigh(in)
	}
	b.mu.Lock()
	g := b.open
	if g != nil && b.weigh != nil && g.weight+w > b.maxWeight {
		// in would take the open batch past the weight limit: send that batch.
		b.open = nil
		go b.run(g)
		g = nil
	}
	if g == nil {
		g = &group[In, Out]{done: make(chan struct{})}
		b.open = g
		time.AfterFunc(b.wait, func() { b.flush(g) })
	}
	g.calls = append(g.calls, c)
	g.live++
	g.weight += w
	full := len(g.calls) >= b.size || (b.weigh != nil && g.weight >= b.maxWeight)
	if full {
		b.open = nil
	}
	b.mu.Unlock()
	if full {
		go b.run(g)
	}

	select {
	case <-g.done:
		return c.out, c.err
	case <-ctx.Done():
		b.leave(g, c)
		return zero, stopped(ctx.Err())
	}
}

// flush sends g when its wait is over, unless it was sent for being full.
func (b *Batcher[In, Out]) flush(g *group[In, Out]) {
	b.mu.Lock()
	if b.open != g {
		b.mu.Unlock()
		return
	}
	b.open = nil
	b.mu.Unlock()
	b.run(g)
}

// leave records that c's caller stopped waiting; the last one to leave
// cancels the send.
func (b *Batcher[In, Out]) leave(g *group[In, Out], c *call[In, Out]) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c.gone = true
	g.live--
	if g.live == 0 && g.cancel != nil {
		g.cancel()
	}
}

// run sends the inputs of g's remaining callers and hands out the results.
func (b *Batcher[In, Out]) run(g *group[In, Out]) {
	defer close(g.done)
	b.mu.Lock()
	var sent []*call[In, Out]
	for _, c := range g.calls {
		if !c.gone {
			sent = append(sent, c)
		}
	}
	if len(sent) == 0 {
		b.mu.Unlock()
		return
	}
	// The send belongs to no single caller: it ends when the last of them
	// leaves, not when the first does.
	ctx, cancel := context.WithCancel(context.Background())
	if t := sent[0].trace; t != nil {
		// Its retries are observed once, through its first caller's trace.
		ctx = provider.WithTrace(ctx, t)
	}
	defer cancel()
	g.cancel = cancel
	b.mu.Unlock()
	b.deliver(ctx, sent)
}

// deliver sends the inputs of calls and sets each call's result or error.
// A splittable failure of several inputs is retried as two halves, sent
// concurrently; the calls whose callers left in between are dropped.
func (b *Batcher[In, Out]) deliver(ctx context.Context, calls []*call[In, Out]) {
	b.mu.Lock()
	calls = slices.DeleteFunc(slices.Clone(calls), func(c *call[In, Out]) bool { return c.gone })
	b.mu.Unlock()
	if len(calls) == 0 {
		return
	}
	ins := make([]In, len(calls))
	for i, c := range calls {
		ins[i] = c.in
	}
	out, err := b.send(ctx, ins)
	if err == nil && len(out) != len(ins) {
		err = mismatch(len(out), len(ins))
	}
	if err == nil {
		for i, c := range calls {
			c.out = out[i]
		}
		return
	}
	if len(calls) > 1 && b.split != nil && ctx.Err() == nil && b.split(err) {
		half := len(calls) / 2
		var wg sync.WaitGroup
		wg.Go(func() { b.deliver(ctx, calls[:half]) })
		b.deliver(ctx, calls[half:])
		wg.Wait()
		return
	}
	for _, c := range calls {
		c.err = err
	}
}

// stopped is the error of a caller whose ctx ended before its result came.
func stopped(err error) *provider.Error {
	return &provider.Error{Kind: provider.Transient, Message: err.Error(), Err: err}
}

func mismatch(got, want int) error {
	return provider.Errorf(provider.BadResponse, "answer has %d results for %d inputs", got, want)
}

// Share returns input i's share of total when total is spread over n inputs
// as evenly as whole numbers allow; the shares of 0..n-1 sum to total. Token
// usage of a batch request is divided among its rows this way.
func Share(total, n, i int) int {
	if n <= 0 || i < 0 || i >= n {
		return 0
	}
	s := total / n
	if i < total%n {
		s++
	}
	return s
}
