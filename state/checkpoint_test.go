package state_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/migrations"
	"github.com/pgimageai/pgimageai/state"
	"github.com/pgimageai/pgimageai/value"
)

func TestMain(m *testing.M) { os.Exit(integration.Main(m)) }

// migrated returns a connection to a fresh database with the pgimageai
// schema, in a PostgreSQL container (Docker; under CI=true a missing engine
// fails).
func migrated(t *testing.T) *pgx.Conn {
	t.Helper()
	conn := integration.NewDatabase(t).Connect(t)
	if _, err := migrations.Apply(context.Background(), conn); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestLaneCheckpointFence: a lane's checkpoint moves forward or stays, never
// back; a write behind the stored position stores nothing and is
// ErrFenced, so a replaced leader cannot overwrite newer results.
func TestLaneCheckpointFence(t *testing.T) {
	conn := migrated(t)
	ctx := context.Background()
	at := func(lsn value.LSN, ord int64) state.Position { return state.Position{Commit: lsn, Ord: ord} }
	store := func(lane string, pos state.Position) error {
		b := &pgx.Batch{}
		state.QueueLaneCheckpoint(b, "s", lane, pos, time.Unix(1700000000, 0))
		br := conn.SendBatch(ctx, b)
		tag, err := br.Exec()
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		return state.Fenced(tag, "s", lane, pos)
	}
	if err := store("public.a", at(0x2000, 5)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		lane   string
		pos    state.Position
		fenced bool
		stored state.Position // what lane_checkpoints holds for the lane afterwards
	}{
		{"an earlier transaction", "public.a", at(0x1000, 9), true, at(0x2000, 5)},
		{"earlier in the same transaction", "public.a", at(0x2000, 4), true, at(0x2000, 5)},
		{"the same position again", "public.a", at(0x2000, 5), false, at(0x2000, 5)},
		{"later in the same transaction", "public.a", at(0x2000, 6), false, at(0x2000, 6)},
		{"a later transaction", "public.a", at(0x3000, 1), false, at(0x3000, 1)},
		{"another lane is its own", "public.b", at(0x1000, 1), false, at(0x1000, 1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := store(tc.lane, tc.pos)
			if tc.fenced != errors.Is(err, state.ErrFenced) || (!tc.fenced && err != nil) {
				t.Fatalf("store %s at %s = %v, want fenced %v", tc.lane, tc.pos, err, tc.fenced)
			}
			var got state.Position
			if err := conn.QueryRow(ctx, "SELECT lsn, ord FROM pgimageai.lane_checkpoints WHERE slot = 's' AND lane = $1", tc.lane).
				Scan(&got.Commit, &got.Ord); err != nil {
				t.Fatal(err)
			}
			if got != tc.stored {
				t.Errorf("lane %s stored %s, want %s", tc.lane, got, tc.stored)
			}
		})
	}
}

// TestSlotCheckpointFence: the slot's checkpoint never moves back either.
func TestSlotCheckpointFence(t *testing.T) {
	conn := migrated(t)
	ctx := context.Background()
	tests := []struct {
		name   string
		lsn    value.LSN
		fenced bool
		stored value.LSN
	}{
		{"first", 0x2000, false, 0x2000},
		{"behind", 0x1000, true, 0x2000},
		{"equal", 0x2000, false, 0x2000},
		{"ahead", 0x3000, false, 0x3000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := state.StoreCheckpoint(ctx, conn, "s", tc.lsn)
			if tc.fenced != errors.Is(err, state.ErrFenced) || (!tc.fenced && err != nil) {
				t.Fatalf("StoreCheckpoint(%s) = %v, want fenced %v", tc.lsn, err, tc.fenced)
			}
			if got, err := state.LoadCheckpoint(ctx, conn, "s"); err != nil || got != tc.stored {
				t.Errorf("LoadCheckpoint = %s, %v; want %s", got, err, tc.stored)
			}
		})
	}
}
