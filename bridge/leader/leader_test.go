package leader

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/internal/pgerr"
	"github.com/pgimageai/pgimageai/migrations"
)

func TestMain(m *testing.M) { os.Exit(integration.Main(m)) }

// fixture is a migrated database and a role of its own that is not the
// bridge's (the bridge runs as the superuser here).
type fixture struct {
	db       *integration.Database
	admin    *pgx.Conn
	otherDSN string // the other role's DSN
	slot     string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	db := integration.NewDatabase(t)
	admin := db.Connect(t)
	ctx := context.Background()
	if _, err := migrations.Apply(ctx, admin); err != nil {
		t.Fatal(err)
	}
	role := "other_" + db.Name
	if _, err := admin.Exec(ctx, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN PASSWORD 'pw'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = db.Postgres().Exec(ctx, "postgres", "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role)
		_ = db.Postgres().Exec(ctx, "postgres", "DROP ROLE IF EXISTS "+pgx.Identifier{role}.Sanitize())
	})
	u, err := url.Parse(db.DSN())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, "pw")
	return &fixture{db: db, admin: admin, otherDSN: u.String(), slot: "slot_" + db.Name}
}

// syncBuffer is a log buffer safe for the lock's goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (f *fixture) lock(t *testing.T, log *syncBuffer) *Lock {
	t.Helper()
	l := New(f.db.DSN(), f.slot, slog.New(slog.NewTextHandler(log, nil)), 50*time.Millisecond)
	t.Cleanup(l.Release)
	return l
}

// holdAdvisory takes the slot's advisory lock key on a session of dsn, as
// an older pgimageai or a squatter does, until the test ends.
func (f *fixture) holdAdvisory(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	var ok bool
	if err := conn.QueryRow(context.Background(), leaderLockSQL, f.slot).Scan(&ok); err != nil || !ok {
		t.Fatalf("take the advisory key: %v, %v", ok, err)
	}
	return conn
}

func acquireWithin(l *Lock, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return l.Acquire(ctx)
}

// TestSquatterDoesNotKeepTheBridgeOnStandby: a session of another role
// holds the advisory key that leadership used to be: the bridge leads all
// the same, logs the squatter as a warning naming its PID and role, and
// Squatters (what status shows) lists it.
func TestSquatterDoesNotKeepTheBridgeOnStandby(t *testing.T) {
	f := newFixture(t)
	squatter := f.holdAdvisory(t, f.otherDSN)
	var log syncBuffer
	l := f.lock(t, &log)
	if err := acquireWithin(l, 5*time.Second); err != nil {
		t.Fatalf("acquire with a squatter: %v (standby %v); log:\n%s", err, l.Standby(), log.String())
	}
	if !l.Held() {
		t.Error("Held is false after Acquire")
	}
	pid := squatter.PgConn().PID()
	out := log.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "squatter_pid="+itoa(pid)) || !strings.Contains(out, "squatter_role=other_") {
		t.Errorf("no warning naming the squatter (pid %d); log:\n%s", pid, out)
	}
	hs, err := Squatters(context.Background(), f.admin, f.slot)
	if err != nil || len(hs) != 1 || hs[0].PID != int32(pid) || !strings.HasPrefix(hs[0].Role, "other_") {
		t.Errorf("Squatters = %+v, %v; want the squatter's session", hs, err)
	}
	info, found, err := Owner(context.Background(), f.admin, f.slot)
	if err != nil || !found || info.PID != int32(l.pid) {
		t.Errorf("Owner = %+v, %v, %v; want the lock's session %d", info, found, err, l.pid)
	}
}

// TestOtherRoleCannotTakeTheLeadership: a role without the bridge's grants
// can neither claim a slot's row nor take it over.
func TestOtherRoleCannotTakeTheLeadership(t *testing.T) {
	f := newFixture(t)
	var log syncBuffer
	l := f.lock(t, &log)
	if err := acquireWithin(l, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	other, err := pgx.Connect(context.Background(), f.otherDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	_, err = TryOn(context.Background(), other, f.slot)
	if code := pgerr.SQLState(err); code != "42501" {
		t.Errorf("another role's claim: %v (SQLSTATE %q), want 42501", err, code)
	}
	if !l.check(context.Background()) {
		t.Error("the bridge lost its leadership to another role's attempt")
	}
}

// TestStandbyWhileLeaderLives: a second instance of the bridge's role waits
// as a standby while the first leads, and takes over when its session ends.
func TestStandbyWhileLeaderLives(t *testing.T) {
	f := newFixture(t)
	var logA, logB syncBuffer
	a, b := f.lock(t, &logA), f.lock(t, &logB)
	if err := acquireWithin(a, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := acquireWithin(b, 2*time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("B's acquire while A leads: %v, want a timeout", err)
	}
	if !strings.Contains(logB.String(), "standby: another pgimageai streams this slot") || !strings.Contains(logB.String(), "pid "+itoa(a.pid)) {
		t.Errorf("B does not name A as the leader; log:\n%s", logB.String())
	}
	a.Release()
	if err := acquireWithin(b, 5*time.Second); err != nil {
		t.Fatalf("B's acquire after A's release: %v", err)
	}
}

// TestOlderInstanceHoldsTheAdvisoryKey: a session of the bridge's own role
// holding the advisory key is an older pgimageai that leads: the bridge
// waits, and leaves no leaders row of its own behind.
func TestOlderInstanceHoldsTheAdvisoryKey(t *testing.T) {
	f := newFixture(t)
	older := f.holdAdvisory(t, f.db.DSN())
	var log syncBuffer
	l := f.lock(t, &log)
	if err := acquireWithin(l, 2*time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire while an older instance leads: %v, want a timeout", err)
	}
	var n int
	if err := f.admin.QueryRow(context.Background(), "SELECT count(*) FROM pgimageai.leaders WHERE slot = $1", f.slot).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d leaders rows (%v), want none", n, err)
	}
	older.Close(context.Background())
	if err := acquireWithin(l, 5*time.Second); err != nil {
		t.Fatalf("acquire after the older instance stopped: %v", err)
	}
}

// TestDeadLeaderRowIsClaimed: a row naming a session that no longer exists
// (a leader killed, or a row restored elsewhere) leads nothing.
func TestDeadLeaderRowIsClaimed(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	other, err := pgx.Connect(ctx, f.otherDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	for _, row := range []string{
		"INSERT INTO pgimageai.leaders (slot, pid, role, backend_start) VALUES ($1, 999999, 10, now())",
		// A live session, of another role: not the row's.
		"UPDATE pgimageai.leaders SET pid = (SELECT pid FROM pg_stat_activity WHERE usename LIKE 'other_%' LIMIT 1) WHERE slot = $1",
	} {
		if _, err := f.admin.Exec(ctx, row, f.slot); err != nil {
			t.Fatal(err)
		}
	}
	var log syncBuffer
	l := f.lock(t, &log)
	if err := acquireWithin(l, 5*time.Second); err != nil {
		t.Fatalf("acquire over a dead leader's row: %v", err)
	}
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }
