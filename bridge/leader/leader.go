// Package leader holds the slot's leader lock: two `pgimageai run` on the
// same slot must not both stream and write. The bridge takes the lock before
// it leads and watches it while it does; it depends on nothing of the
// bridge.
package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgimageai/pgimageai/internal/reconn"
)

// ErrLeadershipLost reports that another pgimageai took the slot's leader
// lock while this one had lost its connection to the source. Run answers it
// by going back to standby; it is exported for callers of lower layers.
var ErrLeadershipLost = errors.New("leadership lost: another pgimageai instance now holds the slot's leader lock")

// Leadership: two `pgimageai run` on the same slot must not both stream and
// write. The slot alone would let only one walsender stream, but both would
// sync the publication, backfill and write. So Run first takes a
// session-level advisory lock on the source, keyed by the slot name, on a
// connection of its own; an instance that cannot take it waits as a standby
// and polls. The lock dies with its session: when the leader is killed its
// backend ends, the lock is released and a standby takes over within a
// poll. The target's checkpoint fences a leader that was replaced while cut
// off (state.ErrFenced), so a stale one cannot overwrite newer results.
//
// The lock needs a session that lives as long as the leader: a connection
// pooler in transaction mode in front of the source breaks it.
const (
	leaderLockSQL  = "SELECT pg_try_advisory_lock(hashtext('pgimageai.leader'), hashtext($1))"
	leaderHeldSQL  = "SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted AND classid = hashtext('pgimageai.leader')::oid AND objid = hashtext($1)::oid AND objsubid = 2)"
	leaderOwnerSQL = `SELECT a.pid, coalesce(a.application_name, ''), coalesce(host(a.client_addr), 'local')
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.classid = hashtext('pgimageai.leader')::oid AND l.objid = hashtext($1)::oid AND l.objsubid = 2`
)

// Lock holds the leader lock of one slot. Acquire, Watch and Release run
// on one goroutine at a time; Held and Standby are safe for concurrent use.
type Lock struct {
	slot string
	log  *slog.Logger
	poll time.Duration // standby poll and lock check interval
	conn *reconn.Conn  // the session holding the lock
	pid  uint32        // its backend PID, to recognise our own stale session
	held atomic.Bool
	// standby: waiting for the lock with a working connection to the source
	// (another instance holds it); what /readyz calls a ready standby.
	standby atomic.Bool
}

// New returns the lock of slot on the source dsn, checked every poll.
func New(dsn, slot string, log *slog.Logger, poll time.Duration) *Lock {
	return &Lock{slot: slot, log: log, poll: poll, conn: reconn.New("source for the leader lock", dsn, nil)}
}

// Held reports whether this instance holds the lock.
func (l *Lock) Held() bool { return l.held.Load() }

// Standby reports whether this instance waits for the lock with a working
// connection to the source (another instance holds it).
func (l *Lock) Standby() bool { return l.standby.Load() }

// Acquire takes the lock, waiting as a standby while another instance holds
// it, until ctx ends. The first connection error is returned (a wrong DSN
// must fail fast); later ones, while waiting, are logged and retried.
func (l *Lock) Acquire(ctx context.Context) error {
	waiting, unreachable := false, false
	for first := true; ; first = false {
		if !first {
			t := time.NewTimer(l.poll)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				l.standby.Store(false)
				return ctx.Err()
			}
		}
		ok, err := l.try(ctx)
		if err == nil {
			unreachable = false
		}
		l.standby.Store(!ok && err == nil)
		switch {
		case ok:
			if waiting {
				l.log.Info("standby taking over: leader lock acquired", "slot", l.slot)
			}
			return nil
		case err != nil && first:
			return err
		case err != nil:
			if !unreachable { // once per outage, not once per poll
				l.log.Warn("standby: source unreachable; retrying", "slot", l.slot, "err", err)
			}
			unreachable = true
		case !waiting:
			waiting = true
			l.log.Info("standby: another pgimageai streams this slot; waiting to take over", "slot", l.slot, "leader", l.owner(ctx))
		}
	}
}

// try connects if needed and tries the lock once. When the lock is held by
// our own previous session (a connection we gave up for dead but the server
// has not noticed yet), that session is terminated first.
func (l *Lock) try(ctx context.Context) (bool, error) {
	conn := l.conn.Current()
	if conn == nil {
		var err error
		if conn, err = l.conn.Get(ctx); err != nil {
			return false, err
		}
		old := l.pid
		l.pid = conn.PgConn().PID()
		if old != 0 {
			// Ending a session of our own role needs no superuser; the
			// timeout makes the call wait until the session is gone.
			_, _ = conn.Exec(ctx, `SELECT pg_terminate_backend(pid, 5000) FROM pg_locks WHERE pid = $1::int AND locktype = 'advisory'
AND classid = hashtext('pgimageai.leader')::oid AND objid = hashtext($2)::oid AND objsubid = 2`, int64(old), l.slot)
		}
	}
	var ok bool
	if err := conn.QueryRow(ctx, leaderLockSQL, l.slot).Scan(&ok); err != nil {
		l.drop()
		return false, fmt.Errorf("take the leader lock of slot %s: %w", l.slot, err)
	}
	l.held.Store(ok)
	return ok, nil
}

// owner describes the session holding the lock, for the standby's log.
func (l *Lock) owner(ctx context.Context) string {
	conn := l.conn.Current()
	if conn == nil {
		return "unknown"
	}
	return Describe(ctx, conn, l.slot)
}

// Info describes the session that holds a slot's leader lock: the
// `pgimageai run` that streams it.
type Info struct {
	PID         int32  // backend PID of the lock's session
	Application string // its application_name
	Client      string // its client address, "local" for a Unix socket
}

func (i Info) String() string {
	return fmt.Sprintf("pid %d, application %q, client %s", i.PID, i.Application, i.Client)
}

// Owner returns the session holding slot's leader lock on conn's database;
// found is false when no pgimageai run holds it.
func Owner(ctx context.Context, conn *pgx.Conn, slot string) (info Info, found bool, err error) {
	err = conn.QueryRow(ctx, leaderOwnerSQL, slot).Scan(&info.PID, &info.Application, &info.Client)
	if errors.Is(err, pgx.ErrNoRows) {
		return info, false, nil
	}
	if err != nil {
		return info, false, fmt.Errorf("read the leader of slot %s: %w", slot, err)
	}
	return info, true, nil
}

// Watch checks the lock every poll until ctx ends. A lost connection is
// re-established and the lock taken again; when another instance got it
// meanwhile, watch sends ErrLeadershipLost on lost and returns.
func (l *Lock) Watch(ctx context.Context, lost chan<- error) {
	t := time.NewTicker(l.poll)
	defer t.Stop()
	unreachable := false
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		if l.check(ctx) {
			unreachable = false
			continue
		}
		if ctx.Err() != nil {
			return
		}
		ok, err := l.try(ctx)
		switch {
		case err != nil:
			if !unreachable { // once per outage, not once per poll
				l.log.Warn("leader lock connection lost; retrying", "slot", l.slot, "err", err)
			}
			unreachable = true
		case ok:
			unreachable = false
			l.log.Info("leader lock re-acquired", "slot", l.slot)
		default:
			l.held.Store(false)
			select {
			case lost <- fmt.Errorf("%w (%s)", ErrLeadershipLost, l.owner(ctx)):
			case <-ctx.Done():
			}
			return
		}
	}
}

// check reports whether the lock session is alive and still holds the lock.
func (l *Lock) check(ctx context.Context) bool {
	conn := l.conn.Current()
	if conn == nil {
		return false
	}
	cctx, cancel := context.WithTimeout(ctx, max(l.poll, 5*time.Second))
	defer cancel()
	var ok bool
	if err := conn.QueryRow(cctx, leaderHeldSQL, l.slot).Scan(&ok); err != nil {
		l.drop()
		return false
	}
	return ok
}

// drop closes the lock session; the server releases the lock when it notices.
func (l *Lock) drop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.conn.Drop(ctx)
}

// Release closes the session, which releases its advisory locks.
func (l *Lock) Release() {
	l.held.Store(false)
	l.drop()
}

// TryOn tries slot's leader lock once on conn, a session of the caller's
// that holds it, when taken, until it closes (pgimageai recover-slot).
func TryOn(ctx context.Context, conn *pgx.Conn, slot string) (bool, error) {
	var ok bool
	if err := conn.QueryRow(ctx, leaderLockSQL, slot).Scan(&ok); err != nil {
		return false, fmt.Errorf("take the leader lock of slot %s: %w", slot, err)
	}
	return ok, nil
}

// Describe describes the session holding slot's leader lock on conn's
// database, "unknown" when it cannot tell.
func Describe(ctx context.Context, conn *pgx.Conn, slot string) string {
	info, found, err := Owner(ctx, conn, slot)
	if err != nil || !found {
		return "unknown"
	}
	return info.String()
}
