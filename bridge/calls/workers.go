package calls

import (
	"context"
	"sync"

	"github.com/pgimageai/pgimageai/internal/supervise"
)

// workers runs the calls of each model on at most that model's parallelism
// of goroutines (functions.Function.Parallelism). A pending call is a queued
// function, not a goroutine: the byte budget may admit thousands of small
// calls at once, and thousands of goroutines parked on a provider's limiter
// cost the garbage collector a scan of every stack, each cycle.
//
// A model's goroutines exist only while it has work: the last one leaves
// when its queue is empty, so a model that is replaced or deleted leaves
// nothing behind. The goroutines are the leadership's (sp): a job gets
// the context of the goroutine that runs it, which ends at the hard stop;
// at the soft stop the queues are run to their end. Queues are FIFO, so calls start in the order the stream
// read them and lanes' prefixes become ready in order. Models never share a
// queue: a slow model's backlog does not delay another's calls.
type workers struct {
	sp     supervise.Spawner // starts the goroutines
	mu     sync.Mutex
	queues map[string]*workQueue // by Rule.ModelKey
}

type workQueue struct {
	jobs    []func(ctx context.Context)
	head    int // jobs[head:] are pending
	running int // goroutines serving the queue
}

// submit queues job on model's queue, starting a goroutine for it when
// fewer than limit serve the queue. It never blocks.
func (w *workers) submit(model string, limit int, job func(ctx context.Context)) {
	w.mu.Lock()
	if w.queues == nil {
		w.queues = map[string]*workQueue{}
	}
	q := w.queues[model]
	if q == nil {
		q = &workQueue{}
		w.queues[model] = q
	}
	q.jobs = append(q.jobs, job)
	start := q.running < max(limit, 1)
	if start {
		q.running++
	}
	w.mu.Unlock()
	if start {
		w.sp.Go("calls "+model, func(ctx context.Context) error { w.serve(ctx, model, q); return nil })
	}
}

// serve runs q's jobs until it is empty.
func (w *workers) serve(ctx context.Context, model string, q *workQueue) {
	for {
		w.mu.Lock()
		if q.head == len(q.jobs) {
			q.running--
			if q.running == 0 {
				delete(w.queues, model)
			}
			w.mu.Unlock()
			return
		}
		job := q.jobs[q.head]
		q.jobs[q.head] = nil
		q.head++
		if q.head == len(q.jobs) { // drained: reuse the slice from its start
			q.jobs, q.head = q.jobs[:0], 0
		} else if q.head >= 1024 && q.head*2 >= len(q.jobs) { // mostly consumed: compact
			n := copy(q.jobs, q.jobs[q.head:])
			clear(q.jobs[n:])
			q.jobs, q.head = q.jobs[:n], 0
		}
		w.mu.Unlock()
		job(ctx)
	}
}
