// Package leader holds the slot's leader lock: two `pgimageai run` on the
// same slot must not both stream and write. The bridge takes the lock before
// it leads and watches it while it does; it depends on nothing of the
// bridge.
//
// Layer: parts.
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
	"github.com/pgimageai/pgimageai/state"
)

// ErrLeadershipLost reports that another pgimageai took the slot's leader
// lock while this one had lost its connection to the source. Run answers it
// by going back to standby; it is exported for callers of lower layers.
var ErrLeadershipLost = errors.New("leadership lost: another pgimageai instance now holds the slot's leader lock")

// Leadership: two `pgimageai run` on the same slot must not both stream and
// write. The slot alone would let only one walsender stream, but both would
// sync the publication, backfill and write. So Run first claims the slot's
// row of pgimageai.leaders on the source (state.ClaimLeader), on a
// connection of its own: the row names that session, and a session that no
// longer exists leads nothing. An instance that cannot claim it waits as a
// standby and polls. When the leader is killed its backend ends and a
// standby takes over within a poll. The target's checkpoint fences a leader
// that was replaced while cut off (state.ErrFenced), so a stale one cannot
// overwrite newer results.
//
// Only roles that may write the bridge's state may write that row. The
// advisory lock that older versions took instead — any role that can
// connect may take it, and so keep the bridge on standby for ever — is
// still taken by the leader, so that an older instance on the same slot
// waits; a session of the bridge's own role that holds it is such an
// instance, and this one then waits in turn. A session of another role
// that holds it is a squatter: logged, shown by status, and ignored.
//
// The leadership needs a session that lives as long as the leader: a
// connection pooler in transaction mode in front of the source breaks it.
const (
	leaderLockSQL = "SELECT pg_catalog.pg_try_advisory_lock(pg_catalog.hashtext('pgimageai.leader'), pg_catalog.hashtext($1))"
	// holdersSQL lists the other sessions that hold the advisory lock key
	// of slot $1, and whether each is of this session's role.
	holdersSQL = `SELECT a.pid, coalesce(a.usename::text, ''),
  a.usesysid IS NOT DISTINCT FROM (SELECT s.usesysid FROM pg_catalog.pg_stat_activity s WHERE s.pid = pg_catalog.pg_backend_pid())
FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.pid <> pg_catalog.pg_backend_pid()
  AND l.classid = pg_catalog.hashtext('pgimageai.leader')::pg_catalog.oid AND l.objid = pg_catalog.hashtext($1)::pg_catalog.oid AND l.objsubid = 2
ORDER BY a.pid`
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
	// squatter is the PID of the squatter last logged, so that one is
	// logged once.
	squatter int32
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

// try connects if needed and claims the leadership once. When our own
// previous session (a connection we gave up for dead but the server has
// not noticed yet) is still there, it is terminated first.
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
			_, _ = conn.Exec(ctx, `SELECT pg_catalog.pg_terminate_backend(a.pid, 5000) FROM pg_catalog.pg_stat_activity a
WHERE a.pid = $1::int AND a.usesysid = (SELECT s.usesysid FROM pg_catalog.pg_stat_activity s WHERE s.pid = pg_catalog.pg_backend_pid())`, int64(old))
		}
	}
	ok, squatters, err := claim(ctx, conn, l.slot)
	if err != nil {
		l.drop()
		return false, err
	}
	for _, h := range squatters {
		if h.PID != l.squatter {
			l.squatter = h.PID
			l.log.Warn("a session of another role holds the leader lock's advisory key; ignored: only the bridge's roles can lead a slot",
				"slot", l.slot, "squatter_pid", h.PID, "squatter_role", h.Role)
		}
	}
	l.held.Store(ok)
	return ok, nil
}

// Holder is a session that holds a slot's advisory lock key.
type Holder struct {
	PID  int32
	Role string
	own  bool // of the caller's own role
}

// claim claims slot's leadership on conn's session and takes the advisory
// lock of older versions (see the const block), in one transaction: when
// an older pgimageai holds that lock, the claim is rolled back. It returns
// the squatters: sessions of other roles that hold that lock. The advisory
// lock is session-level: taken, it outlives the transaction.
//
// On a schema older than pgimageai.leaders (not migrated yet: pgimageai
// uninstall or recover-slot after an upgrade, before migrate), only the
// advisory lock is taken, as older versions did.
func claim(ctx context.Context, conn *pgx.Conn, slot string) (bool, []Holder, error) {
	var rows bool
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.to_regclass('pgimageai.leaders') IS NOT NULL").Scan(&rows); err != nil {
		return false, nil, fmt.Errorf("look for pgimageai.leaders: %w", err)
	}
	if !rows {
		var locked bool
		if err := conn.QueryRow(ctx, leaderLockSQL, slot).Scan(&locked); err != nil {
			return false, nil, fmt.Errorf("take the leader lock of slot %s: %w", slot, err)
		}
		return locked, nil, nil
	}
	var ok bool
	var squatters []Holder
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var err error
		if ok, err = state.ClaimLeader(ctx, tx, slot); err != nil || !ok {
			return err
		}
		var locked bool
		if err := tx.QueryRow(ctx, leaderLockSQL, slot).Scan(&locked); err != nil {
			return fmt.Errorf("take the leader lock of slot %s: %w", slot, err)
		}
		if locked {
			return nil
		}
		hs, err := holders(ctx, tx, slot)
		if err != nil {
			return err
		}
		for _, h := range hs {
			if h.own { // an older pgimageai leads: it knows only the advisory lock
				return errOlderLeads
			}
			squatters = append(squatters, h)
		}
		return nil
	})
	if errors.Is(err, errOlderLeads) {
		return false, nil, nil
	}
	if err != nil {
		return false, nil, err
	}
	return ok, squatters, nil
}

// errOlderLeads rolls a claim back: an older pgimageai holds the advisory
// lock.
var errOlderLeads = errors.New("an older pgimageai leads the slot")

// holders returns the other sessions that hold slot's advisory lock key.
func holders(ctx context.Context, conn interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, slot string) ([]Holder, error) {
	rows, err := conn.Query(ctx, holdersSQL, slot)
	if err != nil {
		return nil, fmt.Errorf("read the holders of the leader lock of slot %s: %w", slot, err)
	}
	hs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Holder, error) {
		var h Holder
		err := r.Scan(&h.PID, &h.Role, &h.own)
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the holders of the leader lock of slot %s: %w", slot, err)
	}
	return hs, nil
}

// Squatters returns the sessions that hold slot's advisory lock key but do
// not lead the slot (for pgimageai status): squatters, or an older
// pgimageai.
func Squatters(ctx context.Context, conn *pgx.Conn, slot string) ([]Holder, error) {
	hs, err := holders(ctx, conn, slot)
	if err != nil {
		return nil, err
	}
	leader, found, err := state.Leader(ctx, conn, slot)
	if err != nil {
		return nil, err
	}
	var out []Holder
	for _, h := range hs {
		if !found || h.PID != leader.PID {
			out = append(out, h)
		}
	}
	return out, nil
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
	PID         int32  // backend PID of the leader's session
	Role        string // its role
	Application string // its application_name
	Client      string // its client address, "local" for a Unix socket
}

func (i Info) String() string {
	return fmt.Sprintf("pid %d, role %s, application %q, client %s", i.PID, i.Role, i.Application, i.Client)
}

// Owner returns the session that leads slot on conn's database; found is
// false when no live pgimageai run leads it.
func Owner(ctx context.Context, conn *pgx.Conn, slot string) (info Info, found bool, err error) {
	s, found, err := state.Leader(ctx, conn, slot)
	if err != nil || !found {
		return info, false, err
	}
	return Info{PID: s.PID, Role: s.Role, Application: s.Application, Client: s.Client}, true, nil
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
	ok, err := state.LeadsSlot(cctx, conn, l.slot)
	if err != nil {
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

// TryOn claims slot's leadership once on conn, a session of the caller's
// that holds it, when taken, until it closes (pgimageai recover-slot).
func TryOn(ctx context.Context, conn *pgx.Conn, slot string) (bool, error) {
	ok, _, err := claim(ctx, conn, slot)
	return ok, err
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
