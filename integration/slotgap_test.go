package integration_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/bridge"
	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/replication"
)

// A slot that skipped changes while the bridge was stopped — dropped by hand
// (as after a failover to a standby that had no copy of it), advanced by
// hand, or a target restored from a backup older than the slot — must never
// lose rows silently: the next start backfills every rule, deletes the
// results of rows deleted meanwhile, records the gap in pgimageai.slot_gaps,
// and calls the provider only for images it has not computed before.

func TestSlotGap(t *testing.T) {
	tests := []struct {
		name  string
		cause string
		// skip makes the slot skip the changes made since stop; restore is
		// what the target held at the first checkpoint.
		skip func(t *testing.T, s *source, restore func())
	}{
		{"dropped", "slot_missing", func(t *testing.T, s *source, _ func()) {
			s.exec(t, "SELECT pg_drop_replication_slot($1)", s.slot)
		}},
		{"advanced", "slot_ahead", func(t *testing.T, s *source, _ func()) {
			s.exec(t, "SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())", s.slot)
		}},
		{"target restored", "slot_ahead", func(t *testing.T, s *source, restore func()) {
			// The slot read the changes; the target lost them (and its
			// checkpoint) to a restore.
			_, stop := s.start(t, s.config(t))
			s.sync(t, 30*time.Second)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			restore()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSource(t)
			ai := newFakeAI(t)
			s.model(t, "vision", ai, `{}`)
			s.rule(t, "caption", "vision", "public.captions", "caption")
			want := map[int]string{}
			insertRows(t, s, 1, 6, 5, want)
			_, stop := s.start(t, s.config(t))
			integration.WaitFor(t, 30*time.Second, "5 captions", func() bool { return tableRows(t, s.conn, "public.captions") == 5 })
			s.sync(t, 30*time.Second)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if got := queryInt(t, s.conn, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND failover", s.slot); got != 1 {
				t.Errorf("the slot was not created as a failover slot (PostgreSQL 17)")
			}
			var checkpoint replication.LSN
			if err := s.conn.QueryRow(context.Background(), "SELECT lsn FROM pgimageai.checkpoints WHERE slot = $1", s.slot).Scan(&checkpoint); err != nil {
				t.Fatal(err)
			}
			s.exec(t, "CREATE TABLE backup_captions AS SELECT * FROM public.captions")
			s.exec(t, "CREATE TABLE backup_lanes AS SELECT * FROM pgimageai.lane_checkpoints WHERE slot = $1", s.slot)
			s.exec(t, "CREATE TABLE backup_results AS SELECT * FROM pgimageai.results")
			restore := func() {
				s.exec(t, "TRUNCATE public.captions")
				s.exec(t, "INSERT INTO public.captions SELECT * FROM backup_captions")
				s.exec(t, "UPDATE pgimageai.checkpoints SET lsn = $2 WHERE slot = $1", s.slot, checkpoint)
				s.exec(t, "DELETE FROM pgimageai.lane_checkpoints WHERE slot = $1", s.slot)
				s.exec(t, "INSERT INTO pgimageai.lane_checkpoints SELECT * FROM backup_lanes")
				s.exec(t, "TRUNCATE pgimageai.results")
				s.exec(t, "INSERT INTO pgimageai.results SELECT * FROM backup_results")
			}

			// While the bridge is stopped: one image changed, one row
			// deleted, three inserted.
			img := pngImage(t, 1001)
			s.exec(t, "UPDATE public.photos SET img = $1 WHERE id = 1", img)
			want[1] = captionOf(magic.DataURL(magic.PNG, img))
			s.exec(t, "DELETE FROM public.photos WHERE id = 5")
			delete(want, 5)
			insertRows(t, s, 6, 9, 3, want)
			tt.skip(t, s, restore)
			calls := ai.Count()

			b, stop := s.start(t, s.config(t))
			integration.WaitFor(t, 30*time.Second, "the backfill", func() bool {
				return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.backfills WHERE rule = 'caption' AND state = 'done'") == 1
			})
			// While it streams again, the slot is never confirmed past the
			// stored checkpoint: the slot is read first, the checkpoint after.
			var wg sync.WaitGroup
			done := make(chan struct{})
			var ahead []string
			wg.Add(1)
			go func() {
				defer wg.Done()
				conn := s.db.Connect(t)
				for {
					select {
					case <-done:
						return
					case <-time.After(20 * time.Millisecond):
					}
					var slotLSN, cp replication.LSN
					if err := conn.QueryRow(context.Background(), "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = $1", s.slot).Scan(&slotLSN); err != nil {
						continue
					}
					if err := conn.QueryRow(context.Background(), "SELECT lsn FROM pgimageai.checkpoints WHERE slot = $1", s.slot).Scan(&cp); err != nil {
						continue
					}
					if slotLSN > cp {
						ahead = append(ahead, slotLSN.String()+" > "+cp.String())
					}
				}
			}()
			insertRows(t, s, 9, 21, 2, want)
			s.sync(t, 30*time.Second)
			close(done)
			wg.Wait()
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if len(ahead) > 0 {
				t.Errorf("the slot was confirmed past the stored checkpoint %d times, e.g. %s", len(ahead), ahead[0])
			}
			assertCaptions(t, captions(t, s.conn), want)

			var cause string
			var orphans int
			var cleaned bool
			err := s.conn.QueryRow(context.Background(), `SELECT cause, coalesce(orphans_deleted, -1), cleaned_at IS NOT NULL
FROM pgimageai.slot_gaps WHERE slot = $1`, s.slot).Scan(&cause, &orphans, &cleaned)
			if err != nil {
				t.Fatalf("no pgimageai.slot_gaps row: %v", err)
			}
			if cause != tt.cause || orphans != 1 || !cleaned {
				t.Errorf("slot_gaps row: cause %s, orphans_deleted %d, cleaned %t; want %s, 1, true", cause, orphans, cleaned, tt.cause)
			}
			// Calls only for the images the target holds no result of: the
			// changed one, the three inserted while stopped (after a restore
			// too: the restore took their results away), the twelve after.
			if got := ai.Count() - calls; got != 16 {
				t.Errorf("%d provider calls after the gap, want 16 (rows computed before must cost nothing)", got)
			}
			t.Logf("calls %d, cache hits %d, unchanged %d", b.Stats().Calls, b.Stats().CacheHits, b.Stats().Unchanged)

			// The next start finds nothing to backfill again.
			_, stop = s.start(t, s.config(t))
			s.sync(t, 30*time.Second)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.slot_gaps WHERE slot = $1", s.slot); n != 1 {
				t.Errorf("%d slot_gaps rows after a clean restart, want 1", n)
			}
		})
	}
}

// TestSlotFailoverTurnedOn: a slot made without failover (by hand, or by a
// pgimageai before failover slots) gets it turned on at the next start.
func TestSlotFailoverTurnedOn(t *testing.T) {
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	// The publication first: pgoutput refuses to decode from before it.
	s.exec(t, "CREATE PUBLICATION "+s.slot+" FOR TABLE pgimageai.rules, pgimageai.models")
	s.exec(t, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", s.slot)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND failover", s.slot); n != 0 {
		t.Fatal("the slot made by hand has failover on already")
	}
	s.start(t, s.config(t))
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND failover", s.slot); n != 1 {
		t.Error("failover was not turned on for the slot")
	}
}

// TestSlotDroppedWhileStreaming drops the slot under a running bridge: it
// waits FailoverWait for it to come back (as a failover would bring it),
// then stops with a message that says what to do; the next start creates it
// and backfills, losing nothing.
func TestSlotDroppedWhileStreaming(t *testing.T) {
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	want := map[int]string{}
	insertRows(t, s, 1, 4, 3, want)
	cfg := s.config(t)
	cfg.Timing.FailoverWait = 3 * time.Second
	b := bridge.New(cfg)
	done := make(chan error, 1)
	go func() { done <- b.Run(context.Background()) }()
	integration.WaitFor(t, 30*time.Second, "3 captions", func() bool { return tableRows(t, s.conn, "public.captions") == 3 })
	s.sync(t, 30*time.Second)
	dropped := time.Now()
	integration.WaitFor(t, 10*time.Second, "the slot dropped", func() bool {
		_, _ = s.conn.Exec(context.Background(), "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL", s.slot)
		_, err := s.conn.Exec(context.Background(), "SELECT pg_drop_replication_slot($1)", s.slot)
		return err == nil
	})
	insertRows(t, s, 4, 6, 2, want)
	s.exec(t, "DELETE FROM public.photos WHERE id = 2")
	delete(want, 2)
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the bridge did not stop within 30s of its slot being dropped")
	}
	t.Logf("stopped %s after the drop: %v", time.Since(dropped).Round(time.Millisecond), err)
	if !errors.Is(err, replication.ErrFailoverTimeout) || !errors.Is(err, replication.ErrNoSlot) {
		t.Errorf("error %v, want ErrFailoverTimeout wrapping ErrNoSlot", err)
	}
	for _, w := range []string{"Start pgimageai run again", "backfills every rule", "after waiting"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q: %v", w, err)
		}
	}
	if time.Since(dropped) < 3*time.Second {
		t.Errorf("stopped %s after the drop, before FailoverWait (3s)", time.Since(dropped))
	}

	_, stop := s.start(t, s.config(t))
	integration.WaitFor(t, 30*time.Second, "4 captions", func() bool { return tableRows(t, s.conn, "public.captions") == 4 })
	s.sync(t, 30*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	assertCaptions(t, captions(t, s.conn), want)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.slot_gaps WHERE slot = $1 AND cause = 'slot_missing'", s.slot); n != 1 {
		t.Errorf("%d slot_missing gaps recorded, want 1", n)
	}
	if ai.Count() != 5 {
		t.Errorf("%d provider calls, want 5", ai.Count())
	}
	env := []string{"PGIMAGEAI_DSN=" + s.db.DSN(), "PGIMAGEAI_SLOT=" + s.slot, "PGIMAGEAI_PUBLICATION=" + s.slot}
	wantCLI(t, env, 0, []string{"Slot gaps", "slot_missing", "1 deleted", "failover", "on: standbys with sync_replication_slots = on"}, "status")
	wantCLI(t, env, 0, []string{`"slot_gaps": [`, `"cause": "slot_missing"`, `"failover": "on"`}, "status", "--format", "json")
}

// TestSlotIdleCheckpointQuiet: on an idle source whose target is in the same
// cluster, storing an idle position writes WAL that becomes the next idle
// position; the bridge must not store the checkpoint again and again for
// its own WAL (it did once a second).
func TestSlotIdleCheckpointQuiet(t *testing.T) {
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	want := map[int]string{}
	insertRows(t, s, 1, 3, 2, want)
	_, stop := s.start(t, s.config(t)) // status updates every 500 ms
	s.sync(t, 30*time.Second)
	time.Sleep(2 * time.Second) // the last real store settles
	stored := func() (lsn replication.LSN, at time.Time) {
		t.Helper()
		if err := s.conn.QueryRow(context.Background(), "SELECT lsn, updated_at FROM pgimageai.checkpoints WHERE slot = $1", s.slot).Scan(&lsn, &at); err != nil {
			t.Fatal(err)
		}
		return lsn, at
	}
	lsn0, at0 := stored()
	stores := 0
	for i := 0; i < 16; i++ {
		time.Sleep(500 * time.Millisecond)
		if lsn, at := stored(); !at.Equal(at0) {
			stores++
			lsn0, at0 = lsn, at
		}
	}
	t.Logf("checkpoint stored %d times in 8 s of an idle source (last at %s)", stores, lsn0)
	if stores > 1 {
		t.Errorf("the checkpoint was stored %d times in 8 s of an idle source, want at most 1", stores)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	assertCaptions(t, captions(t, s.conn), want)
}
