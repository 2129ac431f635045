package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgimageai/pgimageai/internal/backoff"
)

// Config configures a Stream. Zero durations take their defaults.
type Config struct {
	// ConnString is an ordinary libpq connection string or URL of the source
	// database; the stream adds replication=database itself. It may hold a
	// password: the stream never logs it.
	ConnString  string
	Slot        string // an existing permanent pgoutput slot (see EnsureSlot)
	Publication string // an existing publication (see SyncPublication)

	// StatusInterval is how often a standby status update is sent while
	// nothing else prompts one (default 10s). Keep it well below the
	// server's wal_sender_timeout (default 60s).
	StatusInterval time.Duration
	// SilenceTimeout: when the server has sent nothing for this long although
	// status updates asked it to reply, the connection is taken for dead
	// (a network cut without a reset) and re-established. Default
	// max(6 × StatusInterval, 60s).
	SilenceTimeout time.Duration
	// ConnectTimeout bounds each connection attempt when ConnString sets no
	// connect_timeout (default 30s).
	ConnectTimeout time.Duration
	// MinBackoff and MaxBackoff bound the reconnect delay, which doubles per
	// failed attempt, with jitter (defaults 100ms and 10s).
	MinBackoff, MaxBackoff time.Duration
	// FailoverWait is how long Run waits, reconnecting with backoff, while
	// a failover settles: the slot missing on the server it reached, the
	// server a standby, or no server reachable (default 5m). After that it
	// returns the error, which says what to do.
	FailoverWait time.Duration

	// Idle, when set, receives the WAL end of a keepalive at which the
	// stream is idle for the consumer (see progress.idle) instead of the
	// stream confirming it by itself: the consumer stores it where it keeps
	// its checkpoint and then Acks it, so that the slot never confirms a
	// position its checkpoint does not hold. It is called on Run's
	// goroutine and must not block.
	Idle func(LSN)

	Logger *slog.Logger // default slog.Default()
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.StatusInterval, 10*time.Second)
	def(&c.SilenceTimeout, max(6*c.StatusInterval, time.Minute))
	def(&c.ConnectTimeout, 30*time.Second)
	def(&c.MinBackoff, 100*time.Millisecond)
	def(&c.MaxBackoff, 10*time.Second)
	def(&c.FailoverWait, DefaultFailoverWait)
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = c.MinBackoff
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// DefaultFailoverWait is the default of Config.FailoverWait.
const DefaultFailoverWait = 5 * time.Minute

// Stream streams a slot's changes as Events and confirms acked positions to
// the slot. Run drives it from one goroutine, which alone touches the
// connection; Ack may be called from any goroutine at any time.
type Stream struct {
	cfg     Config
	acked   atomic.Uint64 // the highest LSN passed to Ack
	wake    chan struct{} // a pending Ack; capacity 1
	running atomic.Bool

	// What Status reports; written by the Run goroutine.
	streaming  atomic.Bool
	walEnd     atomic.Uint64 // highest server WAL end seen
	confirmed  atomic.Uint64 // flush LSN of the last status update sent
	reconnects atomic.Int64

	mu        sync.Mutex
	interrupt context.CancelFunc // cancels Run's current read, so an Ack is confirmed at once
}

// NewStream returns a Stream for cfg; nothing connects until Run.
func NewStream(cfg Config) *Stream {
	return &Stream{cfg: cfg.withDefaults(), wake: make(chan struct{}, 1)}
}

// Ack records that everything up to lsn (a Commit's EndLSN) is durable in the
// target. Run confirms it to the slot (flush = apply = lsn) promptly: it
// interrupts a pending read to send the status update. Acks below an
// earlier one are ignored. Ack never blocks and is safe for concurrent use,
// also while Run is not running (the ack is confirmed by the next Run).
func (s *Stream) Ack(lsn LSN) {
	for {
		cur := s.acked.Load()
		if uint64(lsn) <= cur {
			return
		}
		if s.acked.CompareAndSwap(cur, uint64(lsn)) {
			break
		}
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
	s.mu.Lock()
	if s.interrupt != nil {
		s.interrupt()
	}
	s.mu.Unlock()
}

// Status is a Stream's state at one moment, for health checks and metrics.
type Status struct {
	Streaming    bool  // START_REPLICATION succeeded and the connection is up
	ServerWALEnd LSN   // the highest WAL end the server reported (its sent position)
	Confirmed    LSN   // the flush LSN of the last standby status update
	Reconnects   int64 // connections lost and re-established (or being)
}

// Status returns the stream's state; it is safe for concurrent use.
func (s *Stream) Status() Status {
	return Status{
		Streaming:    s.streaming.Load(),
		ServerWALEnd: LSN(s.walEnd.Load()),
		Confirmed:    LSN(s.confirmed.Load()),
		Reconnects:   s.reconnects.Load(),
	}
}

// sawWALEnd records a WAL end reported by the server.
func (s *Stream) sawWALEnd(lsn LSN) {
	for {
		cur := s.walEnd.Load()
		if uint64(lsn) <= cur || s.walEnd.CompareAndSwap(cur, uint64(lsn)) {
			return
		}
	}
}

func (s *Stream) ackedLSN() LSN { return LSN(s.acked.Load()) }

func (s *Stream) setInterrupt(cancel context.CancelFunc) {
	s.mu.Lock()
	s.interrupt = cancel
	s.mu.Unlock()
}

// Run streams the slot's changes into out until ctx ends, when it returns
// ctx.Err(), or until an unrecoverable state, when it returns an error that
// wraps one of the package's sentinels (ErrSlotInvalidated, ErrPrivilege,
// ErrWALLevel, ErrNoSlot, ErrNoPublication, ErrSlotMismatch, ErrProtocol) and
// says what to do. It does not close out.
//
// start is the checkpoint: the EndLSN of the last transaction applied to the
// target (0 when there is none). Transactions whose commit LSN is below it
// are skipped, and start is confirmed to the slot before any ack.
//
// Events arrive in commit order: Begin, its *Change and *Message events,
// Commit. Run reconnects by itself, with backoff, after network errors,
// server restarts, a terminated walsender, or a slot still held by a
// predecessor's walsender. If the connection is lost inside a transaction
// it emits Reset: the consumer discards the open transaction, which the
// server sends again, whole. A transaction whose Commit was emitted is never
// emitted again, by this Run.
//
// While out is full Run reads nothing more from the server but keeps sending
// status updates, so the walsender does not time out however long the
// consumer takes. When the server shuts down while transactions it sent are
// not acked yet, Run disconnects rather than hold the shutdown up (a
// walsender of PostgreSQL 18 or older waits for the client's flush), and
// resumes after the restart; while out is full it notices by probing the
// server with a plain connection, which a server in shutdown refuses with
// SQLSTATE 57P03. Run must not be called concurrently with itself.
func (s *Stream) Run(ctx context.Context, start LSN, out chan<- Event) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("replication: Stream.Run is already running")
	}
	defer s.running.Store(false)
	log := s.cfg.Logger.With("slot", s.cfg.Slot)
	if !ValidSlotName(s.cfg.Slot) {
		return errors.New("replication: slot name must be 1 to 63 lower-case letters, digits and underscores")
	}

	p := newProgress(start)
	bo := backoff.Backoff{Min: s.cfg.MinBackoff, Max: s.cfg.MaxBackoff}
	failures := 0
	var settling time.Time // since when the server has been settling (see Settling)
	for {
		sess := &session{s: s, p: p, out: out, log: log, resumed: failures > 0}
		err := sess.run(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if sess.streamed {
			settling = time.Time{}
		}
		quiet := false // a settling failover is logged once, not per attempt
		if Settling(err) {
			if settling.IsZero() {
				settling = time.Now()
				log.Warn("waiting for the source to settle, as after a failover", "err", err, "limit", s.cfg.FailoverWait)
			}
			quiet = true
			if waited := time.Since(settling); waited >= s.cfg.FailoverWait {
				return fmt.Errorf("%w after waiting %s for a failover to end: %w", ErrFailoverTimeout, waited.Round(time.Second), err)
			}
		} else if !retryable(err) {
			return err
		}
		if p.lost() {
			select {
			case out <- Reset{Err: err}:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if sess.streamed {
			bo.Reset()
			failures = 0
		}
		failures++
		s.reconnects.Add(1)
		delay := bo.Next()
		if !quiet {
			log.Warn("replication connection lost; reconnecting", "err", err, "attempt", failures, "delay", delay.Round(time.Millisecond))
		}
		if err := backoff.Wait(ctx, delay); err != nil {
			return err
		}
	}
}
