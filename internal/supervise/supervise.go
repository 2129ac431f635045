// Package supervise owns the goroutines of one leadership: every one is
// started by a Supervisor (Go) and joined by it (Stop, Wait) before the next
// leadership starts, so that a step-down followed at once by a new
// leadership never has two writers.
//
// Stop is the one way a leadership ends: soft first — the drain signal
// (Draining) tells every goroutine to finish what it has in flight and
// return — then hard after a deadline: the contexts of the goroutines still
// running are cancelled. No context is kept by the supervisor: each
// goroutine gets one of its own, whose cancel function the supervisor holds.
//
// It is a leaf: it imports the standard library only.
//
// Layer: toolkit.
package supervise

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Spawner starts a goroutine of a leadership. run gets a context that ends
// at the hard stop and carries the drain signal (Draining); its error, when
// not nil and not the hard stop's, is the leadership's failure (Wait).
type Spawner interface {
	Go(name string, run func(ctx context.Context) error)
}

// ErrStopped is the error of a Go called once the supervisor has joined
// its goroutines: run was not started.
var ErrStopped = errors.New("supervise: started after the leadership ended")

// Supervisor starts and joins the goroutines of one leadership. It is safe
// for concurrent use; the zero value is not usable: New.
type Supervisor struct {
	drain     chan struct{} // closed by Drain: the soft stop
	drainOnce sync.Once

	mu      sync.Mutex
	idle    *sync.Cond                 // signalled when running drops to 0
	running int                        // goroutines started and not returned
	cancels map[int]entry              // the contexts not ended yet
	soft    map[int]context.CancelFunc // of Soft's contexts not ended yet
	drained bool                       // Drain was called
	next    int
	hard    bool  // the contexts are cancelled: what Go starts ends at once
	joined  bool  // Wait returned with nothing running: Go starts nothing
	err     error // the first failure
}

// entry is a context the supervisor gave: of a goroutine (name) or of
// Context (no name).
type entry struct {
	name   string
	cancel context.CancelFunc
}

// New returns a Supervisor with nothing running.
func New() *Supervisor {
	s := &Supervisor{drain: make(chan struct{}), cancels: map[int]entry{}, soft: map[int]context.CancelFunc{}}
	s.idle = sync.NewCond(&s.mu)
	return s
}

type drainKey struct{}
type spawnerKey struct{}

// Draining returns the drain signal of a supervised ctx: closed when the
// soft stop begins. nil (never closed) for a ctx no Supervisor gave.
func Draining(ctx context.Context) <-chan struct{} {
	c, _ := ctx.Value(drainKey{}).(chan struct{})
	return c
}

// From returns the Spawner of a ctx a Supervisor gave (Go, Context), or
// nil.
func From(ctx context.Context) Spawner {
	s, _ := ctx.Value(spawnerKey{}).(*Supervisor)
	if s == nil {
		return nil
	}
	return s
}

// OrNew returns From(ctx), or for a ctx of no leadership (a test, a
// command) a new Supervisor, whose goroutines the caller joins itself.
func OrNew(ctx context.Context) Spawner {
	if sp := From(ctx); sp != nil {
		return sp
	}
	return New()
}

// newContext returns a context that ends at the hard stop, registered
// under the returned id (release it with done).
func (s *Supervisor) newContext(name string) (context.Context, int) {
	ctx, cancel := context.WithCancel(context.Background())
	ctx = context.WithValue(context.WithValue(ctx, drainKey{}, s.drain), spawnerKey{}, s)
	id := s.next
	s.next++
	s.cancels[id] = entry{name: name, cancel: cancel}
	if s.hard {
		cancel()
	}
	return ctx, id
}

// Context returns a context that ends at the hard stop and carries the
// drain signal and the supervisor (From): for what the leadership's
// goroutines share but does not run on one of its own (a connection's
// dial, a constructor that starts goroutines through From).
func (s *Supervisor) Context() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, _ := s.newContext("")
	return ctx
}

// Go starts run on a goroutine of its own, joined by Stop and Wait; it may
// be called from any goroutine, while Stop or Wait waits too. Once the
// supervisor has joined its goroutines it starts nothing and records
// ErrStopped.
func (s *Supervisor) Go(name string, run func(ctx context.Context) error) {
	s.mu.Lock()
	if s.joined {
		if s.err == nil {
			s.err = fmt.Errorf("%s: %w", name, ErrStopped)
		}
		s.mu.Unlock()
		return
	}
	ctx, id := s.newContext(name)
	s.running++
	s.mu.Unlock()
	go func() {
		err := run(ctx)
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.running--; s.running == 0 {
			s.idle.Broadcast()
		}
		hard := ctx.Err() != nil
		s.cancels[id].cancel()
		delete(s.cancels, id)
		if err != nil && s.err == nil && !(hard && errors.Is(err, context.Canceled)) {
			s.err = fmt.Errorf("%s: %w", name, err)
		}
	}()
}

// Drain begins the soft stop: Draining's channel closes and Soft's
// contexts end.
func (s *Supervisor) Drain() {
	s.drainOnce.Do(func() { close(s.drain) })
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drained = true
	for id, c := range s.soft {
		c()
		delete(s.soft, id)
	}
}

// Soft returns a child of a supervised ctx that ends at the soft stop too:
// the context of a goroutine that has nothing in flight to finish (a
// poller, a watcher). For a ctx no Supervisor gave it is
// context.WithCancel.
func Soft(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	s, _ := ctx.Value(spawnerKey{}).(*Supervisor)
	if s == nil {
		return ctx, cancel
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.drained {
		cancel()
		return ctx, cancel
	}
	id := s.next
	s.next++
	s.soft[id] = cancel
	return ctx, func() {
		cancel()
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.soft, id)
	}
}

// Cancel is the hard stop at once: every context the supervisor gave ends,
// and so does every one it gives from now on.
func (s *Supervisor) Cancel() {
	s.Drain()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hard = true
	for _, e := range s.cancels {
		e.cancel()
	}
}

// Wait waits for every goroutine started, and for those they start, then
// returns the first failure. Afterwards Go starts nothing.
func (s *Supervisor) Wait() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.running > 0 {
		s.idle.Wait()
	}
	s.joined = true
	for id, e := range s.cancels { // Context's: nothing runs on them any more
		e.cancel()
		delete(s.cancels, id)
	}
	return s.err
}

// Stop is the one way the leadership ends: soft (Drain), then, if
// goroutines still run after deadline, hard (Cancel); it returns once every
// goroutine has returned, with the first failure. A deadline <= 0 is the
// hard stop at once.
func (s *Supervisor) Stop(deadline time.Duration) error {
	s.Drain()
	joined := make(chan struct{})
	go func() { // ends with the last goroutine, below
		s.mu.Lock()
		for s.running > 0 {
			s.idle.Wait()
		}
		s.mu.Unlock()
		close(joined)
	}()
	if deadline > 0 {
		t := time.NewTimer(deadline)
		defer t.Stop()
		select {
		case <-joined:
		case <-t.C:
		}
	}
	s.Cancel()
	<-joined
	return s.Wait()
}

// Running returns the names of the goroutines still running, for a stop
// that waits too long to say on what.
func (s *Supervisor) Running() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.cancels {
		if e.name != "" {
			out = append(out, e.name)
		}
	}
	sort.Strings(out)
	return out
}
