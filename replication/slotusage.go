package replication

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// SlotUsage is what a slot holds back on its server, beside what ReadSlot
// gives: for pgimageai status and the pgimageai_slot_* metrics.
type SlotUsage struct {
	Active         bool   // a walsender streams it
	ActivePID      int32  // the walsender holding the slot; 0 when inactive
	WALStatus      string // reserved, extended, unreserved or lost ("" before PostgreSQL 13)
	HasSafeWALSize bool   // the server reports safe_wal_size (PostgreSQL 13+)
	// SafeWALSize is nil when no limit applies (max_slot_wal_keep_size = -1)
	// or the slot has lost its WAL.
	SafeWALSize *int64
	// CurrentLSN is pg_current_wal_lsn(), or pg_last_wal_replay_lsn() on a
	// standby.
	CurrentLSN LSN
	// RetainedBytes is CurrentLSN minus the slot's restart_lsn: the WAL the
	// slot keeps on disk.
	RetainedBytes int64
}

// slotUsageSQL reads a slot's usage. to_jsonb spares a query per server
// version: wal_status and safe_wal_size exist from PostgreSQL 13 on.
const slotUsageSQL = `WITH here AS (SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END AS lsn)
SELECT s.active, coalesce(s.active_pid, 0), coalesce(pg_catalog.to_jsonb(s) ->> 'wal_status', ''), pg_catalog.to_jsonb(s) ? 'safe_wal_size',
  (pg_catalog.to_jsonb(s) ->> 'safe_wal_size')::bigint, coalesce(here.lsn, '0/0'),
  coalesce(pg_wal_lsn_diff(here.lsn, s.restart_lsn), 0)::bigint
FROM pg_catalog.pg_replication_slots s, here WHERE s.slot_name = $1`

// ReadSlotUsage returns the usage of slot name; found is false when there is
// no such slot. It reads only; conn must not be used concurrently.
func ReadSlotUsage(ctx context.Context, conn *pgx.Conn, name string) (u SlotUsage, found bool, err error) {
	err = conn.QueryRow(ctx, slotUsageSQL, name).Scan(&u.Active, &u.ActivePID, &u.WALStatus, &u.HasSafeWALSize, &u.SafeWALSize,
		&u.CurrentLSN, &u.RetainedBytes)
	if errors.Is(err, pgx.ErrNoRows) {
		return SlotUsage{}, false, nil
	}
	if err != nil {
		return SlotUsage{}, false, fmt.Errorf("read slot %s: %w", name, err)
	}
	return u, true, nil
}

// ReadSlotHere returns slot name when it belongs to the database conn is
// connected to: ErrNoSlot when there is no such slot, ErrSlotMismatch (with
// the slot) when it belongs to another database. A message written to the
// WAL of that database reaches a bridge streaming the slot (pgimageai retry
// checks this before it writes one).
func ReadSlotHere(ctx context.Context, conn *pgx.Conn, name string) (Slot, error) {
	slot, found, err := ReadSlot(ctx, conn, name)
	if err != nil {
		return slot, err
	}
	var db string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		return slot, fmt.Errorf("read current database: %w", err)
	}
	switch {
	case !found:
		return slot, fmt.Errorf("%w: slot %s is not in pg_replication_slots of database %q", ErrNoSlot, name, db)
	case slot.Database != db:
		return slot, fmt.Errorf("%w: slot %s belongs to database %q, not to %q", ErrSlotMismatch, name, slot.Database, db)
	}
	return slot, nil
}
