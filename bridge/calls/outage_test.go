package calls

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/bridge/cost"
	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/internal/circuit"
	"github.com/pgimageai/pgimageai/provider"
)

// flakyGen is a TextGenerator whose requests go through a provider.Retrier
// (4 retries, no sleeping but for between, which may run a hook): each
// request fails as fail says for its image, or is answered.
type flakyGen struct {
	mu       sync.Mutex
	fail     func(img []byte) error // nil = answer
	between  func()                 // run in the wait before a retry
	requests atomic.Int32
}

func (g *flakyGen) GenerateText(ctx context.Context, img provider.Image, _ string) (provider.Completion, error) {
	g.mu.Lock()
	fail, between := g.fail, g.between
	g.mu.Unlock()
	r := provider.Retrier{MaxRetries: 4, Sleep: func(ctx context.Context, _ time.Duration) error {
		if between != nil {
			between()
		}
		return ctx.Err()
	}}
	var out provider.Completion
	err := r.Do(ctx, func(context.Context) error {
		g.requests.Add(1)
		if fail != nil {
			if err := fail(img.Data); err != nil {
				return err
			}
		}
		out = provider.Completion{Text: "ok"}
		return nil
	})
	return out, err
}

func (g *flakyGen) set(fail func([]byte) error, between func()) {
	g.mu.Lock()
	g.fail, g.between = fail, between
	g.mu.Unlock()
}

var (
	refused  = &provider.Error{Kind: provider.Transient, Message: "dial tcp: connection refused"}
	overload = &provider.Error{Kind: provider.Transient, Status: 503, Message: "overloaded"}
)

// image returns a distinct PNG-headed image.
func image(i int) []byte { return append(append([]byte{}, batchPNG...), byte(i), byte(i>>8)) }

type outageRig struct {
	gen   *flakyGen
	r     *rules.Rule
	cl    *Caller
	br    *circuit.Breaker
	clock *time.Time
}

func newOutageRig(t *testing.T) *outageRig {
	t.Helper()
	gen := &flakyGen{}
	opts, _ := provider.ParseOptions(nil)
	prompt := "p"
	f, err := functions.Bind(functions.Complete, "m", struct{ provider.TextGenerator }{gen}, opts, &prompt)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 4, 20, 0, 0, 0, time.UTC)
	rig := &outageRig{gen: gen, r: &rules.Rule{Config: rules.Config{Name: "r", Model: "m", Prompt: prompt}, Identity: rules.Identity{ModelKey: "m@1"}, Fn: f}, clock: &now}
	rig.br = circuit.New(circuit.Config{Now: func() time.Time { return *rig.clock }})
	rig.cl = New(testSpawner(t), Cost{Budget: cost.NewBudget(1 << 24), Cache: cost.NewCache(0, 0),
		Daily: cost.NewDaily(time.Now, time.Now(), nil, nil)}, nil, nil)
	rig.cl.SetBreaker(rig.br)
	return rig
}

// call makes the call of image i (a replay when replay) and waits for it.
func (g *outageRig) call(t *testing.T, i int, replay bool) *work.Call {
	t.Helper()
	var c *work.Call
	var err error
	if replay {
		c, err = g.cl.Replay(context.Background(), g.r, nil, image(i), "p")
	} else {
		c, err = g.cl.Start(context.Background(), g.r, nil, image(i), "p", false)
	}
	if err != nil {
		t.Fatal(err)
	}
	<-c.Done
	return c
}

// TestOutageParks: calls of a model whose requests are all refused park
// their rows, after a few requests in all rather than five each; once it
// is down a call parks with no request; the next probe is ONE request, and
// when it is answered the model is up again.
func TestOutageParks(t *testing.T) {
	g := newOutageRig(t)
	g.gen.set(func([]byte) error { return refused }, nil)
	var wg sync.WaitGroup
	calls := make([]*work.Call, 6)
	for i := range calls {
		wg.Add(1)
		go func() { defer wg.Done(); calls[i] = g.call(t, i, false) }()
	}
	wg.Wait()
	for i, c := range calls {
		if work.ParkedBy(c.Err) == nil {
			t.Errorf("call %d: %v, want parked", i, c.Err)
		}
	}
	if n := g.gen.requests.Load(); n > 6+circuit.DefaultThreshold {
		t.Errorf("%d requests for 6 rows of a model that is down, want at most %d", n, 6+circuit.DefaultThreshold)
	}
	if st := g.br.State("m"); st != circuit.Down {
		t.Fatalf("model %v, want down", st)
	}
	before := g.gen.requests.Load()
	if c := g.call(t, 10, false); work.ParkedBy(c.Err) == nil || g.gen.requests.Load() != before {
		t.Errorf("a call while down: %v, %d requests; want parked with none", c.Err, g.gen.requests.Load()-before)
	}
	*g.clock = g.clock.Add(time.Second) // the first probe is due
	if c := g.call(t, 11, true); work.ParkedBy(c.Err) == nil || g.gen.requests.Load() != before+1 {
		t.Errorf("a failed probe: %v, %d requests; want parked after one", c.Err, g.gen.requests.Load()-before)
	}
	*g.clock = g.clock.Add(2 * time.Second)
	g.gen.set(nil, nil)
	if c := g.call(t, 12, true); c.Err != nil || c.Result.Text != "ok" {
		t.Errorf("the answered probe: %v", c.Err)
	}
	if st := g.br.State("m"); st != circuit.Up {
		t.Errorf("model %v after an answered probe, want up", st)
	}
}

// TestOutageOrTheRow: what a row that keeps failing is, by what the model
// does around it.
func TestOutageOrTheRow(t *testing.T) {
	const bad = 99
	isBad := func(img []byte) bool { return string(img) == string(image(bad)) }
	tests := []struct {
		name       string
		fail       error
		around     bool // the model answers another row between the bad row's retries
		replay     bool
		wantParked bool
	}{
		{name: "5xx for its image while others are answered: provider_error", fail: overload, around: true},
		{name: "refused for its image while others are answered: provider_error", fail: refused, around: true},
		{name: "5xx with nothing else answered: parked (it may be an outage)", fail: overload, wantParked: true},
		{name: "a replay failing alone while up: provider_error", fail: overload, replay: true},
		{name: "a 4xx: provider_error", fail: &provider.Error{Kind: provider.Permanent, Status: 400, Message: "bad image"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := newOutageRig(t)
			n := 0
			var between func()
			if tc.around {
				between = func() { n++; g.call(t, n, false) }
			}
			g.gen.set(func(img []byte) error {
				if isBad(img) {
					return tc.fail
				}
				return nil
			}, between)
			c := g.call(t, bad, tc.replay)
			if parked := work.ParkedBy(c.Err) != nil; parked != tc.wantParked {
				t.Fatalf("parked %v (%v), want %v", parked, c.Err, tc.wantParked)
			}
			if !tc.wantParked && functions.ReasonOf(c.Err) != functions.ProviderError {
				t.Errorf("reason %q, want provider_error", functions.ReasonOf(c.Err))
			}
			if want := circuit.Up; !tc.wantParked && g.br.State("m") != want {
				t.Errorf("model %v, want %v", g.br.State("m"), want)
			}
			var pe *provider.Error
			if !tc.wantParked && errors.As(c.Err, &pe) && pe.Kind == provider.Transient && pe.Attempts != 5 {
				t.Errorf("%d attempts, want its 5", pe.Attempts)
			}
		})
	}
}
