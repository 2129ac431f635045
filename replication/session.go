package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// session is the life of one replication connection within Run: connect,
// check the slot, START_REPLICATION, then receive, emit and confirm until an
// error. Only the Run goroutine uses it.
type session struct {
	s       *Stream
	p       *progress
	out     chan<- Event
	log     *slog.Logger
	resumed bool // a reconnect, not the first connection of the Run

	conn     *pgconn.PgConn
	dec      *decoder
	user     string // login role, for advice
	streamed bool   // START_REPLICATION succeeded: reset the backoff
	liveness
}

// liveness is what tells a session whether its connection is alive: when
// it last confirmed, when it last heard from the server, and the server's
// requests for an immediate reply in a row.
type liveness struct {
	lastStatus time.Time // when the last status update was sent
	lastRecv   time.Time // when the server last sent something (or we last listened)
	pings      int       // consecutive immediate reply requests (see serverStopping)
	pingEnd    LSN       // their WAL end
}

// run connects and streams until an error; it never returns nil.
func (ss *session) run(ctx context.Context) error {
	startLSN, err := ss.connect(ctx)
	if ss.conn != nil {
		defer ss.close()
	}
	if err != nil {
		return explain(err, ss.user)
	}
	ss.streamed = true
	ss.s.streaming.Store(true)
	defer ss.s.streaming.Store(false)
	if ss.resumed {
		ss.log.Info("replication stream resumed", "lsn", startLSN)
	} else {
		ss.log.Info("replication stream started", "publication", ss.s.cfg.Publication, "lsn", startLSN)
	}
	return explain(ss.loop(ctx), ss.user)
}

// close sends a last status update, so that acks that came in since the
// previous one reach the slot, and closes the connection.
func (ss *session) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if ss.streamed && !ss.conn.IsClosed() {
		_ = ss.status(ctx, false) // best effort: the connection may be broken
	}
	_ = ss.conn.Close(ctx)
}

// loop receives messages, with a read deadline at the next status update,
// until an error.
func (ss *session) loop(ctx context.Context) error {
	s := ss.s
	ss.lastRecv = time.Now()
	for {
		next := ss.lastStatus.Add(s.cfg.StatusInterval)
		if !time.Now().Before(next) {
			if time.Since(ss.lastRecv) > s.cfg.SilenceTimeout {
				return fmt.Errorf("no message from the server for %s; taking the connection for dead", s.cfg.SilenceTimeout)
			}
			if err := ss.status(ctx, true); err != nil {
				return err
			}
			next = ss.lastStatus.Add(s.cfg.StatusInterval)
		}

		rctx, cancel := context.WithDeadline(ctx, next)
		s.setInterrupt(cancel) // from here an Ack cancels rctx ...
		select {
		case <-s.wake: // ... and one from before is seen here
			if err := ss.status(ctx, false); err != nil {
				s.setInterrupt(nil)
				cancel()
				return err
			}
		default:
		}
		msg, err := ss.conn.ReceiveMessage(rctx)
		s.setInterrupt(nil)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// A deadline or an Ack interrupted the read. pgconn keeps the
			// connection open on a timeout, and pgproto3 resumes a message
			// read in part, so we just carry on.
			if rctx.Err() != nil && !ss.conn.IsClosed() && (pgconn.Timeout(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
				continue
			}
			return err
		}
		ss.lastRecv = time.Now()
		if err := ss.handle(ctx, msg); err != nil {
			return err
		}
	}
}

// handle processes one backend message of the copy-both stream.
func (ss *session) handle(ctx context.Context, msg pgproto3.BackendMessage) error {
	switch m := msg.(type) {
	case *pgproto3.CopyData:
		if len(m.Data) == 0 {
			return fmt.Errorf("%w: empty CopyData", ErrProtocol)
		}
		switch m.Data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(m.Data[1:])
			if err != nil {
				return fmt.Errorf("%w: %v", ErrProtocol, err)
			}
			walEnd := LSN(ka.ServerWALEnd)
			ss.p.receive(walEnd)
			ss.s.sawWALEnd(walEnd)
			var advanced bool
			if hook := ss.s.cfg.Idle; hook != nil {
				if ss.p.idleFor(walEnd, ss.s.ackedLSN()) {
					hook(walEnd)
				}
			} else {
				advanced = ss.p.idle(walEnd, ss.s.ackedLSN())
			}
			if ss.serverStopping(ka) {
				return errServerStopping
			}
			if ka.ReplyRequested || advanced {
				return ss.status(ctx, ka.ReplyRequested)
			}
			return nil
		case pglogrepl.XLogDataByteID:
			xld, err := pglogrepl.ParseXLogData(m.Data[1:])
			if err != nil {
				return fmt.Errorf("%w: %v", ErrProtocol, err)
			}
			start, end := LSN(xld.WALStart), LSN(xld.ServerWALEnd)
			ss.p.receive(max(start, end))
			ss.s.sawWALEnd(max(start, end))
			ev, err := ss.dec.decode(start, xld.WALData)
			if err != nil {
				return err
			}
			return ss.event(ctx, ev)
		}
		return fmt.Errorf("%w: unexpected CopyData message %q", ErrProtocol, m.Data[0])
	case *pgproto3.ErrorResponse:
		return pgconn.ErrorResponseToPgError(m)
	case *pgproto3.NoticeResponse:
		ss.log.Info("server notice", "severity", m.Severity, "code", m.Code, "message", m.Message)
		return nil
	case *pgproto3.CopyDone, *pgproto3.CommandComplete, *pgproto3.ReadyForQuery:
		return fmt.Errorf("the server ended the replication stream (%T)", msg)
	}
	return fmt.Errorf("%w: unexpected %T in the replication stream", ErrProtocol, msg)
}

// errServerStopping ends a session whose server waits in shutdown for acks.
var errServerStopping = errors.New("the server is shutting down and waits for transactions not yet acked; disconnecting so that it can stop (they are sent again after the restart)")

// stoppingPings is how many reply requests in a row, each within
// stoppingWindow of our status update, mean a walsender in shutdown.
const (
	stoppingPings  = 20
	stoppingWindow = 50 * time.Millisecond
)

// serverStopping reports whether the server is shutting down and waits for
// a flush position we cannot confirm yet. Up to PostgreSQL 18 a walsender in
// shutdown (WalSndDone) does not exit until the client confirms the flush of
// everything sent, asking for a reply again as soon as one arrives; with
// transactions emitted but not acked (a slow provider) a fast shutdown of
// the server would hang until the consumer catches up. Nothing else makes a
// walsender request replies back to back: normally it asks only after
// wal_sender_timeout/2 without one. Disconnecting lets the server stop; the
// slot still holds the unacked transactions and Run skips those it emitted
// when they come again.
func (ss *session) serverStopping(ka pglogrepl.PrimaryKeepaliveMessage) bool {
	walEnd := LSN(ka.ServerWALEnd)
	if !ka.ReplyRequested || time.Since(ss.lastStatus) > stoppingWindow || walEnd != ss.pingEnd {
		ss.pings, ss.pingEnd = 0, walEnd
		return false
	}
	ss.pings++
	return ss.pings >= stoppingPings && ss.p.confirmed < walEnd
}

// event applies the skip rules of progress and emits ev.
func (ss *session) event(ctx context.Context, ev Event) error {
	p := ss.p
	switch e := ev.(type) {
	case nil:
		return nil
	case Begin:
		if !p.begin(e.FinalLSN) {
			return nil
		}
		if err := ss.emit(ctx, e); err != nil {
			return err
		}
		p.open = true
	case Commit:
		if !p.commitReceived() {
			return nil
		}
		if err := ss.emit(ctx, e); err != nil {
			return err
		}
		p.committed(e.EndLSN)
	case *Change:
		if !p.inTx {
			return fmt.Errorf("%w: %s outside a transaction", ErrProtocol, e.Op)
		}
		if p.skipping {
			return nil
		}
		return ss.emit(ctx, e)
	case *Message:
		if !p.message(e.Transactional, e.LSN) {
			return nil
		}
		if err := ss.emit(ctx, e); err != nil {
			return err
		}
		if !e.Transactional {
			p.messageEmitted(e.LSN)
		}
	}
	return nil
}

// emit sends ev on out. While out is full it keeps the server informed:
// status updates go out every StatusInterval and on acks, and no message is
// read, so the walsender waits for us without timing out.
//
// Not reading, emit cannot see the keepalives by which serverStopping
// notices a walsender in shutdown, and that walsender would wait for our
// flush position as long as the consumer is stuck (a target refusing
// writes), holding up the server's fast shutdown. So once emit has been
// blocked for a StatusInterval, it probes the server with each status update
// (probeStopping, one probe at a time) and gives the connection up with
// errServerStopping when the server refuses new connections with 57P03.
func (ss *session) emit(ctx context.Context, ev Event) error {
	select {
	case ss.out <- ev:
		return nil
	default:
	}
	defer func() { ss.lastRecv = time.Now() }() // we were not listening meanwhile
	t := time.NewTimer(time.Until(ss.lastStatus.Add(ss.s.cfg.StatusInterval)))
	defer t.Stop()
	blocked := time.Now()
	var probe chan bool // the probe in flight, nil when none
	for {
		select {
		case ss.out <- ev:
			return nil
		case <-t.C:
			if err := ss.status(ctx, true); err != nil {
				return err
			}
			t.Reset(ss.s.cfg.StatusInterval)
			if probe == nil && time.Since(blocked) >= ss.s.cfg.StatusInterval {
				// Buffered and not cancelled on return: a probe ends by its
				// own timeout, never half-way through a connection.
				probe = make(chan bool, 1)
				go func(c chan<- bool) { c <- ss.s.probeStopping(context.WithoutCancel(ctx)) }(probe)
			}
		case stopping := <-probe:
			probe = nil
			if stopping {
				return errServerStopping
			}
		case <-ss.s.wake:
			if err := ss.status(ctx, false); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// status sends a standby status update confirming p.flush as the flush and
// apply positions, and the received position as the write position (see
// progress.received). All three are set explicitly: pglogrepl would replace
// a zero flush position with the write position. Unless force, it is sent
// only when the flush position moved. It asks the server to reply when the
// server has been quiet for a StatusInterval, which makes a silent dead
// connection detectable.
func (ss *session) status(ctx context.Context, force bool) error {
	lsn := ss.p.flush(ss.s.ackedLSN())
	if !force && lsn == ss.p.sent {
		return nil
	}
	if lsn == 0 {
		// Unreachable: connect confirms the slot's confirmed_flush_lsn, which
		// is never 0. Sending 0 would confirm nothing; refuse to pretend.
		return errors.New("replication: no position to confirm")
	}
	err := pglogrepl.SendStandbyStatusUpdate(ctx, ss.conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: pglogrepl.LSN(ss.p.write(lsn)),
		WALFlushPosition: pglogrepl.LSN(lsn),
		WALApplyPosition: pglogrepl.LSN(lsn),
		ClientTime:       time.Now(),
		ReplyRequested:   time.Since(ss.lastRecv) >= ss.s.cfg.StatusInterval,
	})
	if err != nil {
		return fmt.Errorf("send standby status: %w", err)
	}
	ss.p.sent = lsn
	ss.s.confirmed.Store(uint64(lsn))
	ss.lastStatus = time.Now()
	return nil
}
