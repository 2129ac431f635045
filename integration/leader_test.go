package integration_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/bridge"
	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

// TestLeaderStepsDown cuts the leader's lock session (as a network cut
// would) while a standby polls: the standby takes the lock, the old leader
// finds it taken when it checks, stops streaming and waits as a standby; the
// new leader streams, and the target is complete.
func TestLeaderStepsDown(t *testing.T) {
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")

	var logA syncBuffer
	cfgA := s.config(t)
	cfgA.Timing.LeaderPoll = 3 * time.Second // A checks its lock seldom: B wins the race
	cfgA.Logger = slog.New(slog.NewTextHandler(&logA, nil))
	_, stopA := s.start(t, cfgA)
	want := map[int]string{}
	insertRows(t, s, 1, 51, 10, want)
	s.sync(t, 30*time.Second)

	cfgB := s.config(t)
	cfgB.Timing.LeaderPoll = 100 * time.Millisecond
	ctxB, cancelB := context.WithCancel(context.Background())
	doneB := make(chan error, 1)
	go func() { doneB <- bridge.New(cfgB).Run(ctxB) }()
	var errB error
	stopB := sync.OnceFunc(func() { cancelB(); errB = <-doneB })
	t.Cleanup(stopB)
	time.Sleep(500 * time.Millisecond) // B polls as a standby meanwhile

	// End A's lock session, as the server does when A's connection is cut.
	n := queryInt(t, s.conn, `SELECT count(pg_terminate_backend(pid)) FROM pg_locks
WHERE locktype = 'advisory' AND granted AND classid = hashtext('pgimageai.leader')::oid AND objid = hashtext($1)::oid AND objsubid = 2`, s.slot)
	if n != 1 {
		t.Fatalf("terminated %d lock sessions, want 1", n)
	}
	integration.WaitFor(t, 20*time.Second, "A to step down", func() bool { return strings.Contains(logA.String(), "stepping down to standby") })
	insertRows(t, s, 51, 101, 10, want)
	s.sync(t, 60*time.Second) // only B can confirm these
	assertCaptions(t, captions(t, s.conn), want)
	if !strings.Contains(logA.String(), "standby: another pgimageai streams this slot") {
		t.Errorf("A does not wait as a standby; its log:\n%s", logA.String())
	}
	if err := stopA(); err != nil {
		t.Errorf("A's stop as a standby: %v", err)
	}
	if stopB(); errB != nil {
		t.Errorf("B: %v", errB)
	}
	if n := ai.Count(); n > 100+8 {
		t.Errorf("%d requests for 100 rows", n)
	}
}

// TestCheckpointFencing writes as two instances would after a failover: a
// lane's batch whose position is below the lane's stored one is refused with
// ErrFenced and writes nothing, one at or above it is applied; lanes are
// fenced each on their own; the slot's checkpoint is fenced the same way.
func TestCheckpointFencing(t *testing.T) {
	s := newSource(t)
	ctx := context.Background()
	errOp := func(detail string) []sink.Op {
		return []sink.Op{state.Error{Rule: "r", SourceTable: "public.photos", Key: []byte(`{"id": 1}`), Reason: "provider_error", Detail: detail}}
	}
	w := sink.NewWriter(s.db.DSN(), s.slot, "public.a")
	stale := sink.NewWriter(s.db.DSN(), s.slot, "public.a")
	other := sink.NewWriter(s.db.DSN(), s.slot, "public.b")
	at := func(lsn replication.LSN, ord int64) state.Position { return state.Position{Commit: lsn, Ord: ord} }
	if err := w.Write(ctx, []sink.Op{state.OwnWrites{}}, at(0x2000, 5), time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, pos := range []state.Position{at(0x1000, 9), at(0x2000, 4)} { // an earlier transaction; earlier inside the same one
		err := stale.Write(ctx, errOp("stale"), pos, time.Time{})
		if !errors.Is(err, state.ErrFenced) {
			t.Fatalf("stale write at %s = %v, want ErrFenced", pos, err)
		}
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors"); n != 0 {
		t.Errorf("the fenced batches wrote %d errors rows", n)
	}
	// Another lane is not behind lane a: its own position counts.
	if err := other.Write(ctx, errOp("other lane"), at(0x1000, 1), time.Time{}); err != nil {
		t.Errorf("lane b at 0/1000: %v", err)
	}
	for _, pos := range []state.Position{at(0x2000, 5), at(0x2000, 6), at(0x3000, 0)} { // equal: the same batch again
		if err := stale.Write(ctx, errOp("ok"), pos, time.Time{}); err != nil {
			t.Errorf("write at %s: %v", pos, err)
		}
	}
	lanes, err := state.LoadLaneCheckpoints(ctx, s.conn, s.slot)
	if err != nil || lanes["public.a"] != at(0x3000, 0) || lanes["public.b"] != at(0x1000, 1) {
		t.Errorf("lane checkpoints %v (%v), want a at 0/3000#0 and b at 0/1000#1", lanes, err)
	}
	if err := w.StoreCheckpoint(ctx, 0x3000); err != nil {
		t.Fatal(err)
	}
	if err := stale.StoreCheckpoint(ctx, 0x2000); !errors.Is(err, state.ErrFenced) {
		t.Errorf("stale slot checkpoint = %v, want ErrFenced", err)
	}
	if got, err := state.LoadCheckpoint(ctx, s.conn, s.slot); err != nil || got != 0x3000 {
		t.Errorf("checkpoint %s (%v), want 0/3000", got, err)
	}
}
