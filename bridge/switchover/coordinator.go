package switchover

import (
	"context"
	"log/slog"
	"time"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/internal/supervise"
)

// Coordinator keeps, for the engine's goroutine, the watchers of the
// running switches and the markers placed in the WAL: what each does when
// the engine reads it — a switch, an abort, a drop of given-up side work.
// Its methods are called from the engine's goroutine only; watchers report
// through Reports.
type Coordinator struct {
	log            *slog.Logger
	sp             supervise.Spawner // starts the watchers
	srcDSN, tgtDSN string
	reports        chan Report
	watchers       map[string]watcher // by side rule
	markers        map[string]Marker  // by nonce, until read in the WAL
	placed         map[string]string  // nonce of the marker placed for a side rule, until read
	// emit writes a marker to the source's WAL (Emit); tests replace it.
	emit func(ctx context.Context, nonce string) error
}

type watcher struct {
	fingerprint string
	stop        chan struct{} // closed when the watcher is to end
}

// Marker is what a placed marker does when the engine reads it: Report (a
// switch, or an abort) or Drop.
type Marker struct {
	Report *Report
	Drop   *rules.Drop
}

// key is what a marker is for: a side rule's switch (or abort), or the
// drop of a side rule's work — one of each may be on its way at once.
func (m Marker) key() string {
	if m.Drop != nil {
		return dropKey(m.Drop.Side)
	}
	return m.Report.Side
}

func dropKey(side string) string { return "drop\x00" + side }

// NewCoordinator returns the Coordinator of a bridge reading srcDSN and
// writing tgtDSN; sp starts its watchers, which end at its soft stop.
func NewCoordinator(sp supervise.Spawner, log *slog.Logger, srcDSN, tgtDSN string) *Coordinator {
	c := &Coordinator{log: log, sp: sp, srcDSN: srcDSN, tgtDSN: tgtDSN, reports: make(chan Report),
		watchers: map[string]watcher{}, markers: map[string]Marker{}, placed: map[string]string{}}
	c.emit = func(ctx context.Context, nonce string) error { return Emit(ctx, c.srcDSN, nonce) }
	return c
}

// Reports returns the watchers' reports.
func (c *Coordinator) Reports() <-chan Report { return c.reports }

// Follow makes the watchers follow sides, the side rules now valid: a
// watcher for each, and none for a side rule gone or changed.
func (c *Coordinator) Follow(sides []*rules.Rule) {
	now := map[string]*rules.Rule{}
	for _, r := range sides {
		now[r.Name] = r
	}
	for name, w := range c.watchers {
		if r := now[name]; r == nil || r.Fingerprint != w.fingerprint {
			close(w.stop)
			delete(c.watchers, name)
			delete(c.placed, name)
		}
	}
	for name, r := range now {
		if _, ok := c.watchers[name]; ok {
			continue
		}
		s := r.Switching
		stop := make(chan struct{})
		c.watchers[name] = watcher{fingerprint: r.Fingerprint, stop: stop}
		w := Watch{Rule: s.Rule, Side: r.Name, SideFP: r.Fingerprint, To: s.To, Table: r.Target.Table, Live: s.Live, Shadow: s.Shadow}
		c.sp.Go("switch watcher "+name, func(ctx context.Context) error {
			ctx, cancel := supervise.Soft(ctx)
			defer cancel()
			Run(ctx, c.log, c.tgtDSN, w, c.reports, stop)
			return nil
		})
	}
}

// Placed reports whether a marker of side rule side's switch (or abort)
// waits to be read.
func (c *Coordinator) Placed(side string) bool { _, ok := c.placed[side]; return ok }

// DropPlaced reports whether a marker of the drop of side rule side's work
// waits to be read.
func (c *Coordinator) DropPlaced(side string) bool { _, ok := c.placed[dropKey(side)]; return ok }

// Place registers m under a secret nonce and writes its marker to the WAL,
// waiting at most emitTimeout. A marker that could not be written is not
// registered: it is placed again when asked again (the watcher reports
// again; a drop is found again at the next reload).
func (c *Coordinator) Place(m Marker) {
	nonce := NewNonce()
	// Bounded by emitTimeout alone: the engine's goroutine waits for it,
	// and a stop waits for the engine's goroutine.
	ctx, cancel := context.WithTimeout(context.Background(), emitTimeout)
	defer cancel()
	if err := c.emit(ctx, nonce); err != nil {
		if ctx.Err() == nil {
			c.log.Warn("placing a switch marker failed; it is placed again when asked again", "err", err)
		}
		return
	}
	c.markers[nonce] = m
	c.placed[m.key()] = nonce
}

// emitTimeout bounds the writing of a marker, which the engine's goroutine
// waits for.
const emitTimeout = 10 * time.Second

// Take returns what the marker message content does, once; ok is false
// for a marker the coordinator did not place (of an earlier run, or
// written by anyone else), which does nothing.
func (c *Coordinator) Take(content []byte) (Marker, bool) {
	nonce, ok := ParseMarker(content)
	if !ok {
		return Marker{}, false
	}
	m, ok := c.markers[nonce]
	if !ok {
		return Marker{}, false
	}
	delete(c.markers, nonce)
	if c.placed[m.key()] == nonce {
		delete(c.placed, m.key())
	}
	return m, true
}
