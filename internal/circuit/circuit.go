// Package circuit tells an outage of an endpoint — a model's server today,
// an image store later — from a failure of one request, and holds each
// endpoint's circuit: closed (Up) while the endpoint answers, open (Down)
// while it does not, when calls are not made at all and one probe request
// at a time is let through at a bounded pace.
//
// What the callers report is the outcome of each request: Answered (the
// endpoint said something, whatever it said of the request: a result, a
// 4xx, an unusable answer, a rate limit) or Unreachable (a refused or reset
// connection, a timeout, a 5xx). An unreachable request counts only when
// the endpoint answered nothing while it was in flight: a request that hung
// while others were answered says nothing of an outage. The circuit opens
// when Threshold such requests in a row came with no answer between them,
// of at least two different rows or with the endpoint answering nothing for
// Quiet; or when a call spent its retries without the endpoint answering
// anything meanwhile (Spent), and either other rows fail too or the
// endpoint has answered nothing for Quiet. A row whose requests fail while
// the endpoint answers the rows around it is the row's failure, not an
// outage: its call fails once its retries are spent.
//
// The package imports nothing of ours but internal/backoff; a Breaker is
// safe for concurrent use.
//
// Layer: toolkit.
package circuit

import (
	"sync"
	"time"

	"github.com/pgimageai/pgimageai/internal/backoff"
)

// State is an endpoint's circuit.
type State uint8

const (
	// Up: the circuit is closed; calls are made.
	Up State = iota + 1
	// Down: the circuit is open; calls are not made (their rows park), and
	// one probe request at a time goes at the probe pace.
	Down
)

func (s State) String() string {
	switch s {
	case Up:
		return "up"
	case Down:
		return "down"
	}
	return "invalid"
}

// Outcome is what one request to an endpoint showed of it.
type Outcome uint8

const (
	// Answered: the endpoint answered, whatever it said of the request.
	Answered Outcome = iota + 1
	// Unreachable: a refused or reset connection, a timeout, a 5xx.
	Unreachable
	// Unknown: the request showed nothing (cancelled by a stop).
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case Answered:
		return "answered"
	case Unreachable:
		return "unreachable"
	case Unknown:
		return "unknown"
	}
	return "invalid"
}

// Permit is what a call of an endpoint may do now.
type Permit uint8

const (
	// Call: the circuit is closed; make the call, with its retries.
	Call Permit = iota + 1
	// Probe: the circuit is open and this call is its probe: ONE request,
	// no retry; its outcome (Report) closes the circuit or sets the next
	// probe.
	Probe
	// Park: the circuit is open; make no request.
	Park
)

func (p Permit) String() string {
	switch p {
	case Call:
		return "call"
	case Probe:
		return "probe"
	case Park:
		return "park"
	}
	return "invalid"
}

// Defaults of a zero Config.
const (
	DefaultThreshold = 3
	DefaultProbeMin  = time.Second
	DefaultProbeMax  = 30 * time.Second
	DefaultQuiet     = 2 * time.Second
)

// Config is how a Breaker decides. Zero fields take the defaults.
type Config struct {
	// Threshold is how many unreachable requests in a row, with no answer
	// between them, of at least two rows or with no answer for Quiet, open
	// the circuit.
	Threshold int
	// ProbeMin and ProbeMax bound the wait between two probes of an open
	// circuit: it doubles from ProbeMin after each failed probe, with
	// jitter, up to ProbeMax (internal/backoff).
	ProbeMin, ProbeMax time.Duration
	// Quiet is how long an endpoint must have answered nothing before one
	// row's failing requests open its circuit (see Threshold, Spent).
	Quiet time.Duration
	// Now is the clock; nil = time.Now.
	Now func() time.Time
	// OnChange is called, outside the Breaker's lock, each time an
	// endpoint's circuit opens or closes.
	OnChange func(Change)
}

// Change is an endpoint's circuit opening (State Down) or closing (Up).
type Change struct {
	Endpoint string
	State    State
	Since    time.Time // when it went down; for Up, when it had gone down
	At       time.Time // now
	Cause    string    // what the last unreachable request said; "" for Up
	Probes   int       // probes made while it was down (Up only)
}

// Endpoint is one endpoint's circuit at a moment.
type Endpoint struct {
	Name      string
	State     State
	Since     time.Time // Down: since when
	Cause     string    // Down: what the last unreachable request said
	Probes    int       // Down: probes made
	NextProbe time.Time // Down: when the next probe may go
}

// Breaker holds the circuit of each endpoint, by name.
type Breaker struct {
	cfg Config

	mu  sync.Mutex
	eps map[string]*endpoint
}

type endpoint struct {
	state   State
	answers uint64    // answers seen: what a call's Mark compares with
	last    time.Time // the last answer; zero: none yet
	since   time.Time
	cause   string
	failStreak
	probeState
}

// failStreak is an endpoint's unreachable requests in a row, with no answer
// between: what opens the circuit.
type failStreak struct {
	fails int    // how many
	first string // the row of the first of them
	solo  bool   // its failures alone may open the circuit (not a replay)
	rows  bool   // they came from at least two rows
}

// probeState is how a Down endpoint is probed.
type probeState struct {
	next    time.Time // the next probe may go then
	probing bool      // a probe is in flight
	probes  int
	bo      backoff.Backoff
}

// New returns a Breaker of cfg with every endpoint Up.
func New(cfg Config) *Breaker {
	if cfg.Threshold <= 0 {
		cfg.Threshold = DefaultThreshold
	}
	if cfg.ProbeMin <= 0 {
		cfg.ProbeMin = DefaultProbeMin
	}
	if cfg.ProbeMax <= 0 {
		cfg.ProbeMax = DefaultProbeMax
	}
	if cfg.Quiet <= 0 {
		cfg.Quiet = DefaultQuiet
	}
	if cfg.ProbeMax < cfg.ProbeMin {
		cfg.ProbeMax = cfg.ProbeMin
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Breaker{cfg: cfg, eps: map[string]*endpoint{}}
}

// get returns ep's state, made Up when new. b.mu is held.
func (b *Breaker) get(ep string) *endpoint {
	e := b.eps[ep]
	if e == nil {
		e = &endpoint{state: Up, probeState: probeState{bo: backoff.Backoff{Min: b.cfg.ProbeMin, Max: b.cfg.ProbeMax}}}
		b.eps[ep] = e
	}
	return e
}

// Allow returns what a call of ep may do now. A Probe must be followed by
// one Report of it (or Release).
func (b *Breaker) Allow(ep string) Permit {
	if b == nil {
		return Call
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.get(ep)
	if e.state == Up {
		return Call
	}
	if e.probing || b.cfg.Now().Before(e.next) {
		return Park
	}
	e.probing = true
	e.probes++
	return Probe
}

// ProbeDue reports whether ep is Down with no probe in flight and its next
// probe due: a caller with rows waiting may then make one call, which Allow
// lets through as the probe.
func (b *Breaker) ProbeDue(ep string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.eps[ep]
	return e != nil && e.state == Down && !e.probing && !b.cfg.Now().Before(e.next)
}

// Mark returns ep's count of answers, for Spent.
func (b *Breaker) Mark(ep string) uint64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.get(ep).answers
}

// Report records the outcome of one request of ep, made for row (the
// identity of its input) — as the probe when probe is set; since is what
// Mark returned before the request began. A row sent again after the
// endpoint came back (a replay) is reported with replay set: its failures
// alone never open the circuit, other rows' must join them (so that a row
// whose own image makes the server fail does not keep the endpoint down).
// It returns ep's state after it.
func (b *Breaker) Report(ep, row string, o Outcome, cause string, probe bool, since uint64, replay bool) State {
	if b == nil {
		return Up
	}
	var ch *Change
	b.mu.Lock()
	e := b.get(ep)
	now := b.cfg.Now()
	if probe {
		e.probing = false
	}
	if o == Unreachable && e.answers != since && !probe {
		o = Unknown // others were answered while it was in flight
	}
	switch o {
	case Answered:
		e.answers++
		e.last = now
		e.fails, e.first, e.rows = 0, "", false
		if e.state == Down {
			ch = &Change{Endpoint: ep, State: Up, Since: e.since, At: now, Probes: e.probes}
			e.state, e.cause, e.probes, e.next = Up, "", 0, time.Time{}
			e.bo.Reset()
		}
	case Unreachable:
		e.cause = cause
		if e.fails == 0 {
			e.first, e.solo = row, !replay
		} else if row != e.first {
			e.rows = true
		}
		e.fails++
		switch {
		case e.state == Down && probe:
			e.next = now.Add(e.bo.Next())
		case e.state == Up && e.fails >= b.cfg.Threshold && (e.rows || e.solo && b.quiet(e, now)):
			ch = b.open(e, ep, now)
		}
	default:
		if probe && e.state == Down {
			e.next = now.Add(b.cfg.ProbeMin) // it showed nothing: probe again soon
		}
	}
	st := e.state
	b.mu.Unlock()
	b.notify(ch)
	return st
}

// Spent is told that a call of ep spent its retries, every one of its
// requests unreachable; mark is what Mark returned before its first. It
// reports whether the call's row is to park — true when ep answered nothing
// since and either other rows' requests fail too or ep has answered nothing
// for Quiet (or ever); the circuit is then opened, if it was not. False is
// the row's own failure: ep answered other rows meanwhile, or shortly
// before, while only this row fails.
func (b *Breaker) Spent(ep string, mark uint64, cause string) bool {
	if b == nil {
		return false
	}
	var ch *Change
	b.mu.Lock()
	e := b.get(ep)
	park := e.answers == mark && (e.rows || b.quiet(e, b.cfg.Now()))
	if park && e.state == Up {
		e.cause = cause
		ch = b.open(e, ep, b.cfg.Now())
	}
	b.mu.Unlock()
	b.notify(ch)
	return park
}

// quiet reports whether e answered nothing for Quiet (or ever) at now.
func (b *Breaker) quiet(e *endpoint, now time.Time) bool {
	return e.last.IsZero() || now.Sub(e.last) >= b.cfg.Quiet
}

// open makes e Down at now. b.mu is held.
func (b *Breaker) open(e *endpoint, ep string, now time.Time) *Change {
	e.state, e.since, e.probes, e.probing = Down, now, 0, false
	e.bo.Reset()
	e.next = now.Add(e.bo.Next())
	return &Change{Endpoint: ep, State: Down, Since: now, At: now, Cause: e.cause}
}

// Restore makes ep Down since since, as a previous run left it: its first
// probe may go at once. It says nothing to OnChange (the change was said).
func (b *Breaker) Restore(ep string, since time.Time, cause string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.get(ep)
	if e.state == Down {
		return
	}
	e.state, e.since, e.cause, e.probes, e.probing, e.next = Down, since, cause, 0, false, time.Time{}
	e.bo.Reset()
}

// Forget drops ep (a model no longer called): it is Up when seen again.
func (b *Breaker) Forget(ep string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.eps, ep)
}

// State returns ep's state.
func (b *Breaker) State(ep string) State {
	if b == nil {
		return Up
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.eps[ep]; e != nil {
		return e.state
	}
	return Up
}

// Endpoints returns every endpoint's circuit, in no order.
func (b *Breaker) Endpoints() []Endpoint {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Endpoint, 0, len(b.eps))
	for name, e := range b.eps {
		ep := Endpoint{Name: name, State: e.state}
		if e.state == Down {
			ep.Since, ep.Cause, ep.Probes, ep.NextProbe = e.since, e.cause, e.probes, e.next
		}
		out = append(out, ep)
	}
	return out
}

func (b *Breaker) notify(ch *Change) {
	if ch != nil && b.cfg.OnChange != nil {
		b.cfg.OnChange(*ch)
	}
}
