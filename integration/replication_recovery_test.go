package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/replication"
)

// Recovery of package replication: a terminated walsender, a loss inside a
// transaction, and an invalidated slot.

// walsenderPID returns the PID of the walsender holding e's slot, once one does.
func (e *replEnv) walsenderPID(t testing.TB) int {
	t.Helper()
	var pid *int
	WaitFor(t, 20*time.Second, "a walsender on the slot", func() bool {
		err := e.conn.QueryRow(context.Background(), `SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1`, e.slot).Scan(&pid)
		return err == nil && pid != nil
	})
	return *pid
}

// terminateWalsender ends the walsender holding e's slot.
func (e *replEnv) terminateWalsender(t testing.TB) {
	t.Helper()
	e.exec(t, `SELECT pg_terminate_backend($1)`, e.walsenderPID(t))
}

// TestReplicationTerminatedWalsender kills the walsender three times while
// transactions stream; every transaction must arrive exactly once.
func TestReplicationTerminatedWalsender(t *testing.T) {
	e := newReplEnv(t, nil, photosDDL, photos)
	s := e.start(t, 0, 4, nil)

	const txs, rows = 60, 5
	var mu sync.Mutex
	seen := map[int32]int{}
	var resets, replays int
	consumed := make(chan struct{})
	go func() { // a consumer like the bridge: discard on Reset, ack each commit
		defer close(consumed)
		var open []int32
		var lastEnd replication.LSN
		for {
			var ev replication.Event
			select {
			case ev = <-s.events:
			case <-time.After(30 * time.Second):
				return
			}
			mu.Lock()
			switch ev := ev.(type) {
			case replication.Begin:
				open = open[:0]
				if ev.FinalLSN < lastEnd {
					replays++
				}
			case *replication.Change:
				v, _ := replication.DecodeValue(nil, ev.Relation.Columns[0], ev.New[0])
				open = append(open, v.(int32))
			case replication.Commit:
				for _, id := range open {
					seen[id]++
				}
				lastEnd = ev.EndLSN
				s.Ack(ev.EndLSN)
			case replication.Reset:
				resets++
				open = open[:0]
			}
			done := len(seen) == txs*rows
			mu.Unlock()
			if done {
				return
			}
		}
	}()

	t0 := time.Now()
	for i := 0; i < txs; i++ {
		if i%20 == 10 {
			e.terminateWalsender(t)
		}
		e.exec(t, `INSERT INTO photos SELECT g, $2, NULL FROM generate_series($1::int, $1::int + 4) g`, i*rows+1, RandomBytes(t, 20<<10))
	}
	<-consumed
	mu.Lock()
	defer mu.Unlock()
	for id := int32(1); id <= txs*rows; id++ {
		if seen[id] != 1 {
			t.Errorf("row %d arrived %d times", id, seen[id])
		}
	}
	if replays != 0 {
		t.Errorf("%d transactions emitted again after a reconnect", replays)
	}
	if r := s.reconnects.Load(); r < 3 {
		t.Errorf("%d reconnects logged, want at least 3", r)
	}
	t.Logf("%d transactions of %d rows through 3 walsender kills in %s; %d reconnects, %d resets",
		txs, rows, time.Since(t0).Round(time.Millisecond), s.reconnects.Load(), resets)
}

// TestReplicationResetMidTransaction loses the connection while the
// consumer holds a transaction open: Reset, then the whole transaction again.
func TestReplicationResetMidTransaction(t *testing.T) {
	e := newReplEnv(t, nil, photosDDL, photos)
	s := e.start(t, 0, 1, nil)
	e.exec(t, `INSERT INTO photos SELECT g, NULL, NULL FROM generate_series(1, 50) g`)
	begin, ok := s.next(t, 10*time.Second).(replication.Begin)
	if !ok {
		t.Fatal("want Begin")
	}
	e.terminateWalsender(t)
	time.Sleep(time.Second) // the stream, blocked on the full channel, notices on its next status update

	partial := 0
	for {
		ev := s.next(t, 10*time.Second)
		if r, ok := ev.(replication.Reset); ok {
			if r.Err == nil {
				t.Error("Reset without a cause")
			}
			t.Logf("Reset after %d changes: %v", partial, r.Err)
			break
		}
		if _, ok := ev.(*replication.Change); !ok {
			t.Fatalf("before the Reset: %#v", ev)
		}
		partial++
	}
	if partial >= 50 {
		t.Fatalf("the whole transaction arrived before the Reset")
	}
	x := s.nextTx(t)
	if x.begin != begin || len(x.changes) != 50 {
		t.Errorf("after Reset: begin %+v (was %+v), %d changes", x.begin, begin, len(x.changes))
	}
	s.quiet(t, 300*time.Millisecond)
}

// TestReplicationSlotInvalidated makes the slot lose its WAL in a container
// of its own (max_slot_wal_keep_size is server-wide): EnsureSlot and Run
// must stop with ErrSlotInvalidated and the recovery advice. Then it takes
// every slot of that server: EnsureSlot must give ErrNoFreeSlot.
func TestReplicationSlotInvalidated(t *testing.T) {
	pg := StartPostgres(t)
	e := newReplEnv(t, pg, photosDDL, photos)
	ctx := t.Context()
	for _, sql := range []string{"ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'", "SELECT pg_reload_conf()"} {
		if err := pg.Exec(ctx, "postgres", sql); err != nil {
			t.Fatal(err)
		}
	}
	WaitFor(t, time.Minute, "the slot to lose its WAL", func() bool {
		e.exec(t, `INSERT INTO photos SELECT g, NULL, repeat('x', 1000) FROM generate_series(1, 1000) g ON CONFLICT (id) DO UPDATE SET note = excluded.note`)
		e.exec(t, `SELECT pg_switch_wal()`)
		e.exec(t, `CHECKPOINT`)
		var status *string
		err := e.conn.QueryRow(ctx, `SELECT wal_status FROM pg_replication_slots WHERE slot_name = $1`, e.slot).Scan(&status)
		return err == nil && status != nil && *status == "lost"
	})

	err := replication.EnsureSlot(ctx, e.conn, e.slot)
	if !errors.Is(err, replication.ErrSlotInvalidated) || !strings.Contains(err.Error(), "pg_drop_replication_slot") {
		t.Errorf("EnsureSlot = %v, want ErrSlotInvalidated with advice", err)
	}
	s := replication.NewStream(replication.Config{ConnString: e.db.DSN(), Slot: e.slot, Publication: e.slot})
	runCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	err = s.Run(runCtx, 0, make(chan replication.Event))
	if !errors.Is(err, replication.ErrSlotInvalidated) {
		t.Errorf("Run = %v, want ErrSlotInvalidated", err)
	}
	t.Logf("Run: %v", err)

	// The same private server, for a full house of slots.
	var used, limit int
	if err := e.conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_replication_slots), current_setting('max_replication_slots')::int`).Scan(&used, &limit); err != nil {
		t.Fatal(err)
	}
	for i := used; i < limit; i++ {
		e.exec(t, `SELECT pg_create_physical_replication_slot($1)`, fmt.Sprintf("filler_%d", i))
	}
	err = replication.EnsureSlot(ctx, e.conn, "one_too_many")
	if !errors.Is(err, replication.ErrNoFreeSlot) || !strings.Contains(err.Error(), "max_replication_slots") {
		t.Errorf("EnsureSlot with every slot taken = %v, want ErrNoFreeSlot", err)
	}
}

// TestReplicationServerOutages restarts the server and then freezes it (a
// network cut without resets) in a container of its own: the stream comes
// back by itself each time and every transaction arrives exactly once.
func TestReplicationServerOutages(t *testing.T) {
	pg := StartPostgres(t)
	e := newReplEnv(t, pg, photosDDL, photos)
	s := e.start(t, 0, 8, func(c *replication.Config) {
		c.SilenceTimeout = 2 * time.Second
		c.ConnectTimeout = 2 * time.Second
	})
	ctx := t.Context()
	row := func(x tx) int32 { return int4Value(t, x.changes[0].Relation, x.changes[0].New[0]) }
	insert := func(id int) {
		t.Helper()
		// A fresh connection each time: the server restarts under the test.
		if err := pg.Exec(ctx, e.db.Name, `INSERT INTO photos VALUES ($1, NULL, NULL)`, id); err != nil {
			t.Fatal(err)
		}
	}

	insert(1)
	x := s.nextTx(t)
	s.Ack(x.commit.EndLSN)
	insert(2) // emitted but never acked: the server sends it again after the restart

	if got := row(s.nextTx(t)); got != 2 {
		t.Fatalf("row %d, want 2", got)
	}
	// A fast shutdown waits for walsenders to see their WAL written by the
	// client: the stream must let it finish although row 2 is not acked.
	t0 := time.Now()
	stopCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := pg.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	t.Logf("server stopped in %s", time.Since(t0).Round(time.Millisecond))
	if err := pg.Start(stopCtx); err != nil {
		t.Fatal(err)
	}
	insert(3)
	if got := row(s.nextTx(t)); got != 3 {
		t.Fatalf("after the restart row %d, want 3 (1 was acked, 2 emitted already)", got)
	}
	t.Logf("server restart: stream back %s after the stop", time.Since(t0).Round(time.Millisecond))

	e.conn = e.db.Connect(t) // the old one died with the restart
	pid := e.walsenderPID(t)
	if err := pg.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second) // > SilenceTimeout: the stream gives the connection up
	if err := pg.Unpause(ctx); err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	insert(4)
	if got := row(s.nextTx(t)); got != 4 {
		t.Fatalf("after the cut row %d, want 4", got)
	}
	t.Logf("network cut: stream back %s after the unpause", time.Since(t0).Round(time.Millisecond))
	if now := e.walsenderPID(t); now == pid {
		t.Error("the frozen connection was kept")
	}
	s.quiet(t, 300*time.Millisecond)
}
