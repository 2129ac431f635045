package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/pgimageai/pgimageai/bridge/apply"
	"github.com/pgimageai/pgimageai/bridge/engine"
	"github.com/pgimageai/pgimageai/bridge/leader"
	"github.com/pgimageai/pgimageai/bridge/track"
	"github.com/pgimageai/pgimageai/internal/supervise"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/sink"
)

// engineErr is what stopped the engine: the failure of the stage that
// cancelled it (see failEngine), unless ctx itself ended.
func engineErr(ctx, engCtx context.Context, err error) error {
	if ctx.Err() == nil {
		if cause := context.Cause(engCtx); cause != nil && !errors.Is(cause, context.Canceled) {
			return cause
		}
	}
	return err
}

// errCheckpoint marks a failure of the checkpointer, which has stopped.
var errCheckpoint = errors.New("checkpoint")

// pipeline is one leadership's stages: stream → engine → lanes, with the
// checkpointer and the leader lock's watch beside them.
type pipeline struct {
	log        *slog.Logger
	timing     Timing
	eng        *engine.Engine
	lanes      *apply.Lanes
	tracker    *track.Tracker
	lock       *leader.Lock
	stream     *replication.Stream
	checkpoint replication.LSN // where the stream starts
	cpw        *sink.Writer    // the checkpointer's
}

// run runs the pipeline until ctx ends or a stage fails. Its goroutines
// (the stream, the checkpointer, the lock's watch) are sup's; run stops
// them in their order — the lanes, then the checkpoint, then the stream —
// and has joined them when it returns.
func (p *pipeline) run(ctx context.Context, sup *supervise.Supervisor) error {
	// The stream and the checkpointer outlive ctx so that a graceful stop
	// can finish what it read and confirm it; sup's hard stop bounds them.
	streamCtx, stopStream := context.WithCancel(sup.Context())
	defer stopStream()
	eng := p.eng
	// The engine's work ends with ctx, or as soon as a stage it may be
	// waiting on fails: a dead lane holding budget, a lost leadership, a
	// failed checkpointer — so that the engine, blocked on the budget, does
	// not wait forever for what will never come.
	engCtx, failEngine := context.WithCancelCause(ctx)
	defer failEngine(nil)
	p.lanes.OnFail(failEngine)

	events := make(chan replication.Event, 16)
	streamErr := make(chan error, 1)
	sup.Go("stream", func(context.Context) error {
		streamErr <- p.stream.Run(streamCtx, p.checkpoint, events)
		return nil
	})
	cp := apply.NewCheckpointer(p.cpw, p.tracker, p.stream.Ack, p.log, p.checkpoint)
	cpCtx, stopCheckpointer := context.WithCancel(sup.Context())
	defer stopCheckpointer()
	cpErr := make(chan error, 1)
	cpDone := make(chan struct{})
	// Whatever the way out, the checkpointer has stopped before run returns:
	// its writer is closed by the caller then.
	defer func() { stopCheckpointer(); <-cpDone }()
	sup.Go("checkpointer", func(context.Context) error {
		defer close(cpDone)
		err := cp.Run(cpCtx)
		if err != nil {
			failEngine(fmt.Errorf("%w: %w", errCheckpoint, err))
		}
		cpErr <- err
		return nil
	})
	lost := make(chan error, 1)
	watching := make(chan struct{})
	sup.Go("leader watch", func(context.Context) error {
		defer close(watching)
		watched := make(chan error, 1)
		p.lock.Watch(streamCtx, watched)
		select {
		case err := <-watched:
			failEngine(err)
			lost <- err
		default: // stopped
		}
		return nil
	})
	defer func() { // the lock's connection is the watcher's until it returns
		stopStream()
		<-watching
	}()

	recheck := time.NewTicker(p.timing.RecheckInterval)
	defer recheck.Stop()
	revalidate := time.NewTicker(p.timing.RevalidateInterval)
	defer revalidate.Stop()

	var err error
loop:
	for {
		select {
		case <-recheck.C:
			if err = eng.Recheck(engCtx); err != nil {
				err = engineErr(ctx, engCtx, err)
				break loop
			}
			eng.RetryExhausted(engCtx)
			if err = eng.Watch(engCtx); err != nil {
				err = engineErr(ctx, engCtx, err)
				break loop
			}
		case <-revalidate.C:
			if err = eng.Revalidate(engCtx); err != nil {
				err = engineErr(ctx, engCtx, err)
				break loop
			}
		case ev := <-events:
			if err = eng.Handle(engCtx, ev); err != nil {
				err = engineErr(ctx, engCtx, err)
				break loop
			}
		case pg := <-eng.Pages():
			eng.Register(pg)
		case rep := <-eng.Switches():
			eng.Switchover(rep)
		case lane := <-p.lanes.Unwritable():
			p.log.Warn("the target refused the bridge's writes for want of a privilege; checking its rules again", "lane", lane)
			if err = eng.RecheckNow(engCtx); err != nil {
				err = engineErr(ctx, engCtx, err)
				break loop
			}
		case lane := <-p.lanes.Repaired():
			if err = eng.Rebackfill(engCtx, lane); err != nil {
				err = engineErr(ctx, engCtx, err)
				break loop
			}
		case err = <-streamErr:
			if !errors.Is(err, replication.ErrSlotInvalidated) { // says it all, with what to do
				err = fmt.Errorf("replication: %w", err)
			}
			break loop
		case err = <-p.lanes.Failed():
			err = fmt.Errorf("apply: %w", err)
			break loop
		case err = <-cpErr:
			err = fmt.Errorf("%w: %w", errCheckpoint, err)
			break loop
		case err = <-lost:
			// Another instance leads now: stop at once, without a drain;
			// it reads again what this one had not confirmed.
			break loop
		case <-ctx.Done():
			break loop
		}
	}
	graceful := ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled))
	if !graceful {
		if !errors.Is(err, ErrLeadershipLost) && !errors.Is(err, errCheckpoint) {
			// What the lanes made durable is where the next run starts.
			stopCheckpointer()
			<-cpErr
		}
		return err
	}
	// Graceful stop: the soft stop of the leadership — the pollers and
	// watchers end, the lanes write what they hold —, then the checkpoint
	// is stored and confirmed, then the stream closes.
	err = nil
	sup.Drain()
	drained := make(chan struct{})
	sup.Go("drain lanes", func(context.Context) error { p.lanes.Drain(); close(drained); return nil })
	timer := time.NewTimer(p.timing.DrainTimeout)
	defer timer.Stop()
	select {
	case <-drained:
		select {
		case err = <-p.lanes.Failed():
			err = fmt.Errorf("apply: %w", err)
		default:
		}
	case <-timer.C:
		err = fmt.Errorf("graceful stop: calls still running after %s (%s); unfinished transactions will be read again on restart",
			p.timing.DrainTimeout, strings.Join(sup.Running(), ", "))
	}
	stopCheckpointer()
	if cerr := <-cpErr; err == nil && cerr != nil {
		err = fmt.Errorf("checkpoint: %w", cerr)
	}
	stopStream()
	<-streamErr
	return err
}
