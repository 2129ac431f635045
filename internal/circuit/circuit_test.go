package circuit

import (
	"testing"
	"time"
)

// clock is a fake clock the tests move by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time            { return c.t }
func (c *clock) add(d time.Duration)       { c.t = c.t.Add(d) }
func newClock() *clock                     { return &clock{t: time.Date(2026, 12, 4, 20, 0, 0, 0, time.UTC)} }
func (s step) String() string              { return s.do }
func u(row string) step                    { return step{do: "unreachable", row: row} }
func replayU(row string) step              { return step{do: "unreachable", row: row, replay: true} }
func hung(row string) step                 { return step{do: "hung", row: row} }
func a(row string) step                    { return step{do: "answered", row: row} }
func spent(row string, mark int) step      { return step{do: "spent", row: row, mark: mark} }
func wait(d time.Duration) step            { return step{do: "wait", d: d} }
func allow(want Permit) step               { return step{do: "allow", permit: want} }
func probe(o Outcome) step                 { return step{do: "probe", outcome: o} }
func state(want State) step                { return step{do: "state", state: want} }
func parks(want bool, mark int) step       { return step{do: "spent?", park: want, mark: mark} }
func changes(n int) step                   { return step{do: "changes", n: n} }
func restore(since time.Duration) step     { return step{do: "restore", d: since} }
func nextWithin(lo, hi time.Duration) step { return step{do: "next", d: lo, hi: hi} }

type step struct {
	do      string
	row     string
	mark    int
	d, hi   time.Duration
	permit  Permit
	outcome Outcome
	state   State
	park    bool
	n       int
	replay  bool
}

// TestBreaker walks the circuit through outages and single bad rows with a
// fake clock.
func TestBreaker(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "answers keep it up", steps: []step{a("r1"), a("r2"), u("r3"), a("r4"), u("r5"), u("r6"), a("r7"), state(Up), allow(Call), changes(0)}},
		{name: "three unreachable of two rows open it", steps: []step{u("r1"), u("r2"), state(Up), u("r3"), state(Down), allow(Park), changes(1)}},
		{name: "one row failing alone does not open it", steps: []step{a("r0"), u("r1"), u("r1"), u("r1"), u("r1"), u("r1"), state(Up), allow(Call)}},
		{name: "one row failing alone for Quiet opens it", steps: []step{a("r0"), u("r1"), u("r1"), wait(2 * time.Second), u("r1"), state(Down)}},
		{name: "a replayed row failing alone never opens it", steps: []step{a("r0"), replayU("r1"), wait(3 * time.Second), replayU("r1"), replayU("r1"), replayU("r1"), state(Up)}},
		{name: "a replayed row and another open it", steps: []step{a("r0"), replayU("r1"), replayU("r1"), replayU("r2"), state(Down)}},
		{name: "one row failing alone, never an answer, opens it", steps: []step{u("r1"), u("r1"), u("r1"), state(Down)}},
		{name: "an answer between resets the count", steps: []step{u("r1"), u("r2"), a("r3"), u("r4"), u("r5"), state(Up), u("r6"), state(Down)}},
		{name: "a row alone while others are answered is the row's", steps: []step{u("bad"), a("r2"), u("bad"), a("r3"), u("bad"), parks(false, 0), state(Up), changes(0)}},
		{name: "a call spent alone, answered shortly before, is the row's", steps: []step{a("r0"), u("r1"), u("r1"), u("r1"), parks(false, 1), state(Up), changes(0)}},
		{name: "a call spent alone after Quiet parks and opens", steps: []step{a("r0"), wait(2 * time.Second), u("r1"), parks(true, 1), state(Down), changes(1)}},
		{name: "a call spent alone with no answer ever parks", steps: []step{u("r1"), parks(true, 0), state(Down)}},
		{name: "a call spent while other rows fail too parks", steps: []step{a("r0"), u("r1"), u("r2"), parks(true, 1), state(Down)}},
		{name: "the first probe waits ProbeMin", steps: []step{u("r1"), u("r2"), u("r3"), allow(Park), wait(400 * time.Millisecond), allow(Park), wait(700 * time.Millisecond), allow(Probe), allow(Park)}},
		{name: "one probe at a time", steps: []step{u("r1"), u("r2"), u("r3"), wait(2 * time.Second), allow(Probe), allow(Park), allow(Park), probe(Unreachable), allow(Park)}},
		{name: "a failed probe doubles the wait up to the cap", steps: []step{u("r1"), u("r2"), u("r3"),
			wait(time.Second), allow(Probe), probe(Unreachable), nextWithin(time.Second, 2*time.Second),
			wait(2 * time.Second), allow(Probe), probe(Unreachable), nextWithin(2*time.Second, 4*time.Second),
			wait(4 * time.Second), allow(Probe), probe(Unreachable), nextWithin(4*time.Second, 8*time.Second),
			wait(8 * time.Second), allow(Probe), probe(Unreachable), nextWithin(8*time.Second, 16*time.Second),
			wait(16 * time.Second), allow(Probe), probe(Unreachable), nextWithin(15*time.Second, 30*time.Second),
			wait(30 * time.Second), allow(Probe), probe(Unreachable), nextWithin(15*time.Second, 30*time.Second),
			wait(30 * time.Second), allow(Probe), probe(Unreachable), nextWithin(15*time.Second, 30*time.Second)}},
		{name: "an answered probe closes it", steps: []step{u("r1"), u("r2"), u("r3"), wait(time.Second), allow(Probe), probe(Answered), state(Up), allow(Call), changes(2)}},
		{name: "a probe that showed nothing is made again soon", steps: []step{u("r1"), u("r2"), u("r3"), wait(time.Second), allow(Probe), probe(Unknown), state(Down), allow(Park), wait(time.Second), allow(Probe)}},
		{name: "a straggler's answer closes it", steps: []step{u("r1"), u("r2"), u("r3"), state(Down), a("r0"), state(Up), changes(2)}},
		{name: "restored down probes at once and says nothing", steps: []step{restore(-time.Hour), state(Down), allow(Probe), changes(0), probe(Answered), state(Up), changes(1)}},
		{name: "a request that hung while others were answered does not count", steps: []step{hung("r1"), hung("r2"), hung("r3"), hung("r4"), state(Up)}},
		{name: "unreachable while down does not move the probe", steps: []step{u("r1"), u("r2"), u("r3"), u("r4"), u("r5"), wait(1100 * time.Millisecond), allow(Probe)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			var got []Change
			b := New(Config{Now: c.now, OnChange: func(ch Change) { got = append(got, ch) }})
			const ep = "model"
			marks := []uint64{b.Mark(ep)}
			for i, s := range tc.steps {
				switch s.do {
				case "unreachable":
					b.Report(ep, s.row, Unreachable, "connection refused", false, b.Mark(ep), s.replay)
				case "hung": // began before an answer came
					since := b.Mark(ep)
					b.Report(ep, "other", Answered, "", false, since, false)
					b.Report(ep, s.row, Unreachable, "timeout", false, since, false)
				case "answered":
					b.Report(ep, s.row, Answered, "", false, b.Mark(ep), s.replay)
					marks = append(marks, b.Mark(ep))
				case "wait":
					c.add(s.d)
				case "allow":
					if p := b.Allow(ep); p != s.permit {
						t.Fatalf("step %d: Allow = %v, want %v", i, p, s.permit)
					}
				case "probe":
					b.Report(ep, "probe", s.outcome, "connection refused", true, b.Mark(ep), false)
				case "state":
					if st := b.State(ep); st != s.state {
						t.Fatalf("step %d: state %v, want %v", i, st, s.state)
					}
				case "spent?":
					if park := b.Spent(ep, marks[s.mark], "HTTP 503"); park != s.park {
						t.Fatalf("step %d: Spent = %v, want %v", i, park, s.park)
					}
				case "changes":
					if len(got) != s.n {
						t.Fatalf("step %d: %d changes %+v, want %d", i, len(got), got, s.n)
					}
				case "restore":
					b.Restore(ep, c.now().Add(s.d), "refused")
				case "next":
					eps := b.Endpoints()
					if len(eps) != 1 || eps[0].State != Down {
						t.Fatalf("step %d: endpoints %+v", i, eps)
					}
					if d := eps[0].NextProbe.Sub(c.now()); d < s.d/2 || d > s.hi {
						t.Fatalf("step %d: next probe in %s, want within [%s, %s]", i, d, s.d/2, s.hi)
					}
				}
			}
		})
	}
}

// TestBreakerChanges: the changes say when the endpoint went down, why, and
// how many probes it took to come back.
func TestBreakerChanges(t *testing.T) {
	c := newClock()
	var got []Change
	b := New(Config{Now: c.now, OnChange: func(ch Change) { got = append(got, ch) }})
	down := c.now()
	for _, row := range []string{"a", "b", "c"} {
		b.Report("m", row, Unreachable, "dial tcp: connection refused", false, b.Mark("m"), false)
	}
	for range 3 {
		c.add(time.Minute)
		if p := b.Allow("m"); p != Probe {
			t.Fatalf("Allow = %v, want probe", p)
		}
		b.Report("m", "a", Unreachable, "HTTP 503", true, b.Mark("m"), false)
	}
	c.add(time.Minute)
	b.Allow("m")
	b.Report("m", "a", Answered, "", true, b.Mark("m"), false)
	if len(got) != 2 {
		t.Fatalf("changes %+v, want 2", got)
	}
	if got[0].State != Down || !got[0].Since.Equal(down) || got[0].Cause != "dial tcp: connection refused" {
		t.Errorf("down: %+v", got[0])
	}
	if got[1].State != Up || !got[1].Since.Equal(down) || got[1].Probes != 4 || got[1].At.Sub(down) != 4*time.Minute {
		t.Errorf("up: %+v", got[1])
	}
	// Other endpoints are not touched.
	if st := b.State("other"); st != Up {
		t.Errorf("another endpoint is %v", st)
	}
}
