package leader

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAcquireAndRelease: an instance alone on a slot leads at once, with
// the slot's leaders row naming its session; on Release it leads no more
// and another instance leads in its place.
func TestAcquireAndRelease(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var logA, logB syncBuffer
	a, b := f.lock(t, &logA), f.lock(t, &logB)
	if a.Held() {
		t.Fatal("Held before Acquire")
	}
	if err := acquireWithin(a, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if !a.Held() || a.Standby() {
		t.Fatalf("after Acquire: held %v, standby %v; want held, not standby", a.Held(), a.Standby())
	}
	info, found, err := Owner(ctx, f.admin, f.slot)
	if err != nil || !found || info.PID != int32(a.pid) {
		t.Fatalf("Owner = %+v, %v, %v; want A's session %d", info, found, err, a.pid)
	}
	if !a.check(ctx) {
		t.Fatal("check: A does not hold the lock it acquired")
	}
	a.Release()
	if a.Held() {
		t.Fatal("Held after Release")
	}
	if err := acquireWithin(b, 5*time.Second); err != nil {
		t.Fatalf("B's acquire after A's release: %v", err)
	}
	if info, found, err := Owner(ctx, f.admin, f.slot); err != nil || !found || info.PID != int32(b.pid) {
		t.Fatalf("Owner after the release = %+v, %v, %v; want B's session %d", info, found, err, b.pid)
	}
}

// TestStepDownWhenAnotherLeads: a leader whose session ended (the
// connection cut, the backend killed) while another instance took the slot
// is told ErrLeadershipLost by its watch, and holds the lock no more; the
// other leads on.
func TestStepDownWhenAnotherLeads(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var logA, logB syncBuffer
	a, b := f.lock(t, &logA), f.lock(t, &logB)
	if err := acquireWithin(a, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := f.admin.Exec(ctx, "SELECT pg_terminate_backend($1)", int32(a.pid)); err != nil {
		t.Fatal(err)
	}
	if err := acquireWithin(b, 5*time.Second); err != nil {
		t.Fatalf("B's acquire once A's session ended: %v; log:\n%s", err, logB.String())
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	lost := make(chan error, 1)
	a.Watch(wctx, lost) // returns once it has reported
	select {
	case err := <-lost:
		if !errors.Is(err, ErrLeadershipLost) {
			t.Fatalf("A's watch reported %v, want ErrLeadershipLost", err)
		}
	default:
		t.Fatalf("A's watch returned without reporting the lost leadership (ctx %v); log:\n%s", wctx.Err(), logA.String())
	}
	if a.Held() {
		t.Error("A still says it holds the lock")
	}
	if !b.check(ctx) {
		t.Error("B lost the lock to A's watch")
	}
}

// TestNoLeadersTable: on a schema without pgimageai.leaders (uninstalled,
// or before migrate) the leadership is the advisory lock alone: the first
// instance takes it, a second waits as a standby, and leads once the first
// releases.
func TestNoLeadersTable(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.admin.Exec(ctx, "DROP TABLE pgimageai.leaders"); err != nil {
		t.Fatal(err)
	}
	var logA, logB syncBuffer
	a, b := f.lock(t, &logA), f.lock(t, &logB)
	if err := acquireWithin(a, 5*time.Second); err != nil {
		t.Fatalf("acquire without pgimageai.leaders: %v; log:\n%s", err, logA.String())
	}
	hs, err := holders(ctx, f.admin, f.slot)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(hs, func(h Holder) bool { return h.PID == int32(a.pid) }) {
		t.Fatalf("holders of the advisory key %+v: A's session %d is not one", hs, a.pid)
	}
	if err := acquireWithin(b, time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("B's acquire while A holds the advisory lock: %v, want a timeout", err)
	}
	if !strings.Contains(logB.String(), "standby") {
		t.Errorf("B waits without saying it is a standby; log:\n%s", logB.String())
	}
	a.Release()
	if err := acquireWithin(b, 5*time.Second); err != nil {
		t.Fatalf("B's acquire after A's release: %v", err)
	}
}
