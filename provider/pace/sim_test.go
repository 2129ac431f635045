package pace

import (
	"container/heap"
	"time"
)

// sim is a discrete-event model of a client that keeps a model's limit
// full against a server of slots requests at once (0 = as many as come),
// the rest waiting in its queue first come first served. answer gives the
// i-th request's service time and output tokens.
type sim struct {
	c      *concurrency
	slots  int
	answer func(i int) (time.Duration, int)

	now     time.Time
	sent    int
	busy    int
	queue   []*req
	events  events
	done    int
	windows []winEnd // the limit at the end of each window
}

type req struct {
	i       int
	sent    time.Time
	service time.Duration
	tokens  int
	at      time.Time // when its answer comes
}

// winEnd is the limit as one window ended.
type winEnd struct {
	at      time.Time
	allowed int
	probing bool
}

type events []*req

func (e events) Len() int           { return len(e) }
func (e events) Less(i, j int) bool { return e[i].at.Before(e[j].at) }
func (e events) Swap(i, j int)      { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)        { *e = append(*e, x.(*req)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

func newSim(c *concurrency, slots int, answer func(int) (time.Duration, int)) *sim {
	return &sim{c: c, slots: slots, answer: answer, now: c.win.start}
}

// fill sends requests while the limit allows.
func (s *sim) fill() {
	for s.c.inFlight < s.c.allowed() {
		d, tok := s.answer(s.sent)
		r := &req{i: s.sent, sent: s.now, service: d, tokens: tok}
		s.sent++
		s.c.take()
		if s.slots == 0 || s.busy < s.slots {
			s.start(r)
		} else {
			s.queue = append(s.queue, r)
		}
	}
}

func (s *sim) start(r *req) {
	s.busy++
	r.at = s.now.Add(r.service)
	heap.Push(&s.events, r)
}

// run goes on for d of simulated time.
func (s *sim) run(d time.Duration) {
	end := s.now.Add(d)
	s.fill()
	for len(s.events) > 0 && s.events[0].at.Before(end) {
		r := heap.Pop(&s.events).(*req)
		s.now = r.at
		s.busy--
		if len(s.queue) > 0 {
			next := s.queue[0]
			s.queue = s.queue[1:]
			s.start(next)
		}
		s.c.inFlight--
		w := s.c.win.start
		s.c.sample(s.now, r.sent, s.now.Sub(r.sent), r.tokens)
		s.done++
		if !s.c.win.start.Equal(w) {
			s.windows = append(s.windows, winEnd{at: s.now, allowed: s.c.allowed(), probing: s.c.lat.probe.saved > 0})
		}
		s.fill()
	}
	s.now = end
}

// since returns the window ends after t.
func (s *sim) since(t time.Time) []winEnd {
	for i, w := range s.windows {
		if w.at.After(t) {
			return s.windows[i:]
		}
	}
	return nil
}

func constant(d time.Duration, tokens int) func(int) (time.Duration, int) {
	return func(int) (time.Duration, int) { return d, tokens }
}
