package park

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/internal/circuit"
	"github.com/pgimageai/pgimageai/internal/reconn"
	"github.com/pgimageai/pgimageai/internal/supervise"
	"github.com/pgimageai/pgimageai/state"
)

// Prefix is the prefix of the logical decoding message at which the engine
// reads a page of parked rows. A marker does anything only when it holds a
// nonce the Drainer registered itself: a role that may write messages
// cannot steer the bridge with one.
const Prefix = "pgimageai.parked"

// Defaults of a zero Config.
const (
	DefaultTick       = time.Second
	DefaultCountEvery = 5 * time.Second
	DefaultPageRows   = 100
	// pageWait bounds the wait for the engine to apply a page: past it the
	// page is given up (its rows stay parked) and asked again.
	pageWait = 5 * time.Minute
)

// Config is what a Drainer needs.
type Config struct {
	Log                  *slog.Logger
	Slot                 string
	SourceDSN, TargetDSN string
	// Circuit is how the models' circuits decide (its OnChange is the
	// Drainer's).
	Circuit circuit.Config
	Rules   *Rules
	// Models returns the models.name of each valid rule, by rule name.
	// It must be safe for concurrent use.
	Models     func() map[string]string
	Tick       time.Duration // how often it looks at the models; 0 = DefaultTick
	CountEvery time.Duration // how often it counts the parked rows; 0 = DefaultCountEvery
	PageRows   int           // rows of a page; 0 = DefaultPageRows
}

// Page is a page of parked rows asked for at a marker: up to Limit rows of
// Model's rules after seq After, in order of arrival.
type Page struct {
	Model string
	After int64
	Limit int
	done  chan Applied
}

// Applied is what the engine routed of a page: the rows (one rule's, the
// first rows after After of the same rule), the seq of the last, and the
// calls started for them.
type Applied struct {
	Rows  int
	Last  int64
	Calls []*work.Call
}

// Done hands what was routed of p back to the Drainer. Call it once.
func (p *Page) Done(a Applied) { p.done <- a }

// Drainer sends parked rows again: one probe row at a time while their
// model is down, when its circuit lets the next probe go; every row, in
// order of arrival, once it is up. Take is called by the engine's
// goroutine; Run by its own; OnChange by anyone.
type Drainer struct {
	cfg     Config
	breaker *circuit.Breaker // the models' circuits, by models.name

	mu      sync.Mutex
	pending map[string]*Page // by nonce
	changes []circuit.Change // to store in pgimageai.model_health
	wake    chan struct{}

	emitMu sync.Mutex
	src    *reconn.Conn // for the markers; under emitMu
}

// New returns the Drainer of cfg.
func New(cfg Config) *Drainer {
	if cfg.Tick <= 0 {
		cfg.Tick = DefaultTick
	}
	if cfg.CountEvery <= 0 {
		cfg.CountEvery = DefaultCountEvery
	}
	if cfg.PageRows <= 0 {
		cfg.PageRows = DefaultPageRows
	}
	if cfg.Rules == nil {
		cfg.Rules = NewRules()
	}
	d := &Drainer{cfg: cfg, pending: map[string]*Page{}, wake: make(chan struct{}, 1), src: reconn.New("source", cfg.SourceDSN, nil)}
	cc := cfg.Circuit
	cc.OnChange = d.OnChange
	d.breaker = circuit.New(cc)
	return d
}

// Breaker returns the models' circuits, by models.name.
func (d *Drainer) Breaker() *circuit.Breaker { return d.breaker }

// Rules returns the Drainer's knowledge of parked rules.
func (d *Drainer) Rules() *Rules { return d.cfg.Rules }

// OnChange is the Breaker's: it logs ONE warning when a model goes down and
// one when it comes back, and stores the change for status.
func (d *Drainer) OnChange(ch circuit.Change) {
	if ch.State == circuit.Down {
		d.cfg.Log.Warn("model down: its requests are refused, time out or fail with 5xx; its rows park (the slot goes on) and are sent again by themselves once it answers; probing it",
			"model", ch.Endpoint, "cause", ch.Cause)
	} else {
		d.cfg.Log.Warn("model answers again: sending its parked rows", "model", ch.Endpoint,
			"down_for", ch.At.Sub(ch.Since).Round(time.Second).String(), "probes", ch.Probes, "parked", d.parkedOf(ch.Endpoint))
	}
	d.mu.Lock()
	d.changes = append(d.changes, ch)
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// parkedOf is the last count of parked rows of model's rules.
func (d *Drainer) parkedOf(model string) int64 {
	var n int64
	ms := d.cfg.Models()
	for _, c := range d.cfg.Rules.Counts() {
		if ms[c.Rule] == model {
			n += c.Rows
		}
	}
	return n
}

// Load restores what a previous run left: the models it left down (their
// first probe goes at once, and no new warning is logged) and the rules
// with parked rows. Call it before the first call and the first write.
func (d *Drainer) Load(ctx context.Context, tgt *pgx.Conn) error {
	hs, err := state.ModelHealths(ctx, tgt, d.cfg.Slot)
	if err != nil {
		return err
	}
	for _, h := range hs {
		if h.Down {
			d.breaker.Restore(h.Model, h.Since, h.Cause)
		}
	}
	mark := d.cfg.Rules.mark()
	counts, err := state.ParkedCounts(ctx, tgt, nil)
	if err != nil {
		return err
	}
	d.cfg.Rules.counted(mark, counts)
	return nil
}

// Take returns the page whose marker content is, once: nil, false for a
// marker the Drainer did not place (or took already).
func (d *Drainer) Take(content []byte) (*Page, bool) {
	if d == nil {
		return nil, false
	}
	var m struct{ Page string }
	if json.Unmarshal(content, &m) != nil || m.Page == "" {
		return nil, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.pending[m.Page]
	delete(d.pending, m.Page)
	return p, p != nil
}

// done is a model's pass or probe that ended.
type done struct {
	model  string
	probe  bool
	cursor int64 // probe: the seq of the row it sent
}

// SetModels sets what Config.Models answers; set before Run.
func (d *Drainer) SetModels(models func() map[string]string) { d.cfg.Models = models }

// Run drains until ctx ends or its soft stop (supervise.Soft), and waits
// for its passes and probes, which ctx's spawner starts.
func (d *Drainer) Run(ctx context.Context) {
	ctx, cancel := supervise.Soft(ctx)
	defer cancel()
	sp := supervise.OrNew(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	tgt := reconn.New("target", d.cfg.TargetDSN, nil)
	defer tgt.Drop(context.WithoutCancel(ctx))
	defer func() {
		d.emitMu.Lock()
		d.src.Drop(context.WithoutCancel(ctx))
		d.emitMu.Unlock()
	}()
	busy := map[string]bool{}       // models with a pass or probe running
	cursor := map[string]int64{}    // per model: the seq of the last probe row
	ended := map[string]time.Time{} // per model: when its last pass ended
	finished := make(chan done)
	tick := time.NewTicker(d.cfg.Tick)
	defer tick.Stop()
	var counted time.Time
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case f := <-finished:
			busy[f.model] = false
			if f.probe {
				cursor[f.model] = f.cursor
			} else {
				ended[f.model] = time.Now()
			}
		case <-d.wake:
			counted = time.Time{} // a model went down or up: count now
		case <-tick.C:
		}
		d.storeHealth(ctx, tgt)
		now := time.Now()
		if now.Sub(counted) >= d.cfg.CountEvery {
			mark := d.cfg.Rules.mark()
			err := tgt.Do(ctx, func(c *pgx.Conn) error {
				counts, err := state.ParkedCounts(ctx, c, nil)
				if err == nil {
					d.cfg.Rules.counted(mark, counts)
				}
				return err
			})
			switch {
			case err != nil && ctx.Err() == nil && !failing:
				d.cfg.Log.Warn("counting the parked rows failed; trying again", "err", err)
				failing = true
			case err == nil:
				failing = false
				counted = now
			}
		}
		for _, model := range d.waiting() {
			if busy[model] {
				continue
			}
			switch {
			case d.breaker.State(model) == circuit.Down:
				if !d.breaker.ProbeDue(model) {
					continue
				}
				busy[model] = true
				wg.Add(1)
				after := cursor[model]
				sp.Go("park probe "+model, func(context.Context) error {
					defer wg.Done()
					last := d.probe(ctx, model, after)
					select {
					case finished <- done{model: model, probe: true, cursor: last}:
					case <-ctx.Done():
					}
					return nil
				})
			case !counted.IsZero() && counted.After(ended[model].Add(time.Second)):
				// Up, and counted since its last pass ended (and its lanes
				// wrote what that pass sent): a pass from the first row.
				busy[model], cursor[model] = true, 0
				wg.Add(1)
				sp.Go("park pass "+model, func(context.Context) error {
					defer wg.Done()
					d.pass(ctx, model)
					select {
					case finished <- done{model: model}:
					case <-ctx.Done():
					}
					return nil
				})
			}
		}
	}
}

// waiting returns the models of the valid rules with parked rows, by the
// last count.
func (d *Drainer) waiting() []string {
	ms := d.cfg.Models()
	seen := map[string]bool{}
	var out []string
	for _, c := range d.cfg.Rules.Counts() {
		if m, ok := ms[c.Rule]; ok && c.Rows > 0 && !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out
}

// probe sends one parked row of model after seq after (from the first
// again when there is none after it), whose call the circuit lets through
// as its probe, and waits for the call. It returns the row's seq.
func (d *Drainer) probe(ctx context.Context, model string, after int64) int64 {
	a, err := d.page(ctx, model, after, 1)
	if err == nil && a.Rows == 0 && after > 0 {
		a, err = d.page(ctx, model, 0, 1)
	}
	if err != nil {
		return after
	}
	wait(ctx, a.Calls)
	return a.Last
}

// pass sends every parked row of model, page by page in order of arrival,
// each page once the calls of the one before ended, until none is left or
// the model is down again.
func (d *Drainer) pass(ctx context.Context, model string) {
	var after int64
	for ctx.Err() == nil && d.breaker.State(model) == circuit.Up {
		a, err := d.page(ctx, model, after, d.cfg.PageRows)
		if err != nil || a.Rows == 0 {
			return
		}
		after = a.Last
		wait(ctx, a.Calls)
	}
}

// wait waits for calls to end, or ctx.
func wait(ctx context.Context, calls []*work.Call) {
	for _, c := range calls {
		select {
		case <-c.Done:
		case <-ctx.Done():
			return
		}
	}
}

// page places the marker of a page and waits for the engine to route it.
func (d *Drainer) page(ctx context.Context, model string, after int64, limit int) (Applied, error) {
	var b [16]byte
	rand.Read(b[:])
	nonce := hex.EncodeToString(b[:])
	p := &Page{Model: model, After: after, Limit: limit, done: make(chan Applied, 1)}
	d.mu.Lock()
	d.pending[nonce] = p
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.pending, nonce)
		d.mu.Unlock()
	}()
	content, _ := json.Marshal(map[string]string{"page": nonce})
	d.emitMu.Lock()
	err := d.src.Do(ctx, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, "SELECT pg_logical_emit_message(true, $1, $2::text)", Prefix, string(content))
		return err
	})
	d.emitMu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			d.cfg.Log.Warn("placing a marker for parked rows failed; trying again", "model", model, "err", err)
		}
		return Applied{}, fmt.Errorf("place a parked rows marker: %w", err)
	}
	t := time.NewTimer(pageWait)
	defer t.Stop()
	select {
	case a := <-p.done:
		return a, nil
	case <-t.C:
		return Applied{}, fmt.Errorf("the engine did not reach the parked rows marker within %s", pageWait)
	case <-ctx.Done():
		return Applied{}, ctx.Err()
	}
}

// storeHealth stores the circuits' changes since the last call; one that
// fails is kept for the next.
func (d *Drainer) storeHealth(ctx context.Context, tgt *reconn.Conn) {
	d.mu.Lock()
	chs := d.changes
	d.changes = nil
	d.mu.Unlock()
	for i, ch := range chs {
		h := state.ModelHealth{Model: ch.Endpoint, Down: ch.State == circuit.Down, Since: ch.Since, Cause: ch.Cause}
		if !h.Down {
			h.Since, h.DownSince, h.Probes = ch.At, ch.Since, ch.Probes
		}
		err := tgt.Do(ctx, func(c *pgx.Conn) error { return state.WriteModelHealth(ctx, c, d.cfg.Slot, h) })
		if err != nil {
			if ctx.Err() == nil {
				d.cfg.Log.Warn("storing a model's health for status failed; trying again", "model", ch.Endpoint, "err", err)
			}
			d.mu.Lock()
			d.changes = append(chs[i:], d.changes...)
			d.mu.Unlock()
			return
		}
	}
}
