package apply

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/bridge/cost"
	"github.com/pgimageai/pgimageai/bridge/track"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/internal/supervise"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

// leadershipLog is the target as the lanes of successive leaderships write
// it: each write carries the generation of the leadership that made it, and
// a write of generation N seen once generation N+1 has begun is a second
// writer.
type leadershipLog struct {
	current atomic.Int64 // the generation that leads now
	mu      sync.Mutex
	writes  map[int64]int
	late    []string // writes of an older generation seen after a newer began
}

func (g *leadershipLog) begin(gen int64) { g.current.Store(gen) }

// genWriter is a lane's writer of generation gen whose writes take delay
// and, like a COMMIT already sent, land whatever ctx says meanwhile.
type genWriter struct {
	log     *leadershipLog
	gen     int64
	delay   time.Duration
	started chan struct{} // signalled when a write begins
}

func (w *genWriter) Write(_ context.Context, ops []sink.Op, pos state.Position, _ time.Time) error {
	select {
	case w.started <- struct{}{}:
	default:
	}
	time.Sleep(w.delay)
	w.log.mu.Lock()
	defer w.log.mu.Unlock()
	if now := w.log.current.Load(); now > w.gen {
		w.log.late = append(w.log.late, fmt.Sprintf("a write of generation %d at %s landed while generation %d leads", w.gen, pos, now))
	}
	if w.log.writes == nil {
		w.log.writes = map[int64]int{}
	}
	w.log.writes[w.gen]++
	return nil
}

func (w *genWriter) Close(context.Context) error  { return nil }
func (w *genWriter) Forget(context.Context) error { return nil }

// TestStepDownNeverTwoWriters: a leadership that steps down while its lanes
// write, followed at once by the next, never has two writers: the old
// leadership's supervisor joins its lanes — the write in flight included —
// before Stop returns, and only then does the next leadership begin.
func TestStepDownNeverTwoWriters(t *testing.T) {
	tests := []struct {
		name     string
		deadline time.Duration // of the stop: 0 = hard at once (the lock lost)
	}{
		{name: "leadership lost: hard stop", deadline: 0},
		{name: "graceful: soft then hard", deadline: time.Minute},
		{name: "soft stop past its deadline", deadline: time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := testRule(t, functions.Complete, 0)
			log := &leadershipLog{}
			for gen := int64(1); gen <= 3; gen++ {
				log.begin(gen)
				sup := supervise.New()
				started := make(chan struct{}, 1)
				tr := track.New(nil)
				ls := New(sup, Config{Log: slog.New(slog.DiscardHandler), MaxOps: 1, Backoff: time.Millisecond,
					Budget: cost.NewBudget(1 << 20), Tracker: tr,
					NewWriter: func(string) Writer {
						return &genWriter{log: log, gen: gen, delay: 30 * time.Millisecond, started: started}
					}})
				ls.cfg.Budget.Acquire(context.Background(), 3*itemCost)
				rec := tr.Begin(time.Time{})
				for i := range 3 {
					it := resultItem(r, i, done(functions.Result{Text: "x"}, nil), rec, state.Position{Commit: 10, Ord: int64(i+1) << eventBits})
					tr.Add(rec)
					ls.Push(it)
				}
				tr.Seal(rec, 11)
				select {
				case <-started: // the step-down comes while a write is in flight
				case <-time.After(5 * time.Second):
					t.Fatal("no write began")
				}
				if err := sup.Stop(tt.deadline); err != nil {
					t.Fatalf("generation %d: Stop: %v", gen, err)
				}
			}
			// A writer of an old leadership that outlived its Stop lands by now.
			time.Sleep(100 * time.Millisecond)
			log.mu.Lock()
			defer log.mu.Unlock()
			for _, l := range log.late {
				t.Error(l)
			}
			for gen := int64(1); gen <= 3; gen++ {
				if log.writes[gen] == 0 {
					t.Errorf("generation %d wrote nothing: the test shows nothing", gen)
				}
			}
		})
	}
}
