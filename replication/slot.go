package replication

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgimageai/pgimageai/internal/pgerr"
	"github.com/pgimageai/pgimageai/value"
)

// Plugin is the output plugin of every slot this package creates or uses.
const Plugin = "pgoutput"

// Slot is a replication slot as pg_replication_slots shows it. Fields that a
// server version lacks stay zero (conflicting is PostgreSQL 16+,
// invalidation_reason, failover and synced 17+).
type Slot struct {
	Name              string
	Type              string // "logical" or "physical"
	Plugin            string
	Database          string
	Temporary         bool
	Active            bool
	RestartLSN        LSN
	ConfirmedFlushLSN LSN
	WALStatus         string // reserved, extended, unreserved or lost
	Invalidation
	// Failover: the slot is synchronised to physical standbys that have
	// sync_replication_slots on (PostgreSQL 17+), so it survives a
	// promotion. Synced: this copy is one such standby's.
	Failover, Synced bool
}

// Invalidation is what says a logical slot can no longer be used.
type Invalidation struct {
	Conflicting        bool   // the rows it needs were removed (hot standby conflicts; 16+)
	InvalidationReason string // wal_removed, rows_removed, … (17+); "" = valid
}

// slotRow is the JSON shape of a pg_replication_slots row (to_jsonb(s)), which
// spares us a query per server version.
type slotRow struct {
	Name              string  `json:"slot_name"`
	Type              string  `json:"slot_type"`
	Plugin            *string `json:"plugin"`
	Database          *string `json:"database"`
	Temporary         bool    `json:"temporary"`
	Active            bool    `json:"active"`
	RestartLSN        *string `json:"restart_lsn"`
	ConfirmedFlushLSN *string `json:"confirmed_flush_lsn"`
	WALStatus         *string `json:"wal_status"`
	invalidationRow
	Failover *bool `json:"failover"`
	Synced   *bool `json:"synced"`
}

// invalidationRow is the JSON shape of Invalidation.
type invalidationRow struct {
	Conflicting        *bool   `json:"conflicting"`
	InvalidationReason *string `json:"invalidation_reason"`
}

// selectSlot reads one slot as JSON; the caller appends the slot_name match.
const selectSlot = `SELECT pg_catalog.to_jsonb(s)::text FROM pg_catalog.pg_replication_slots s WHERE s.slot_name = `

// parseSlot decodes a to_jsonb row of pg_replication_slots.
func parseSlot(js []byte) (Slot, error) {
	var r slotRow
	if err := json.Unmarshal(js, &r); err != nil {
		return Slot{}, fmt.Errorf("parse pg_replication_slots row: %w", err)
	}
	s := Slot{
		Name: r.Name, Type: r.Type, Plugin: deref(r.Plugin), Database: deref(r.Database),
		Temporary: r.Temporary, Active: r.Active, WALStatus: deref(r.WALStatus),
		Invalidation: Invalidation{Conflicting: r.Conflicting != nil && *r.Conflicting, InvalidationReason: deref(r.InvalidationReason)},
		Failover:     deref(r.Failover), Synced: deref(r.Synced),
	}
	var err error
	if r.RestartLSN != nil {
		if s.RestartLSN, err = ParseLSN(*r.RestartLSN); err != nil {
			return Slot{}, fmt.Errorf("slot %s restart_lsn: %w", r.Name, err)
		}
	}
	if r.ConfirmedFlushLSN != nil {
		if s.ConfirmedFlushLSN, err = ParseLSN(*r.ConfirmedFlushLSN); err != nil {
			return Slot{}, fmt.Errorf("slot %s confirmed_flush_lsn: %w", r.Name, err)
		}
	}
	return s, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// check returns why the slot cannot stream for database db, or nil.
func (s Slot) check(db string) error {
	switch {
	case s.Type != "logical" || s.Plugin != Plugin || s.Database != db || s.Temporary:
		return fmt.Errorf("%w: slot %s is a %s slot with plugin %q in database %q (temporary %t); pgimageai needs a permanent logical slot with plugin %s in database %q: drop it or choose another slot name",
			ErrSlotMismatch, s.Name, s.Type, s.Plugin, s.Database, s.Temporary, Plugin, db)
	case s.InvalidationReason != "":
		return slotInvalidated(s.Name, fmt.Sprintf("was invalidated (invalidation_reason %s)", s.InvalidationReason))
	case s.Conflicting:
		return slotInvalidated(s.Name, "was invalidated by a conflict with recovery")
	case s.WALStatus == value.WALLost:
		return slotInvalidated(s.Name, "lost WAL it needs (wal_status lost; see max_slot_wal_keep_size)")
	case s.ConfirmedFlushLSN == 0:
		return slotInvalidated(s.Name, "has no confirmed_flush_lsn")
	}
	return nil
}

// ValidSlotName reports whether name is a valid replication slot name: 1 to
// 63 lower-case letters, digits and underscores, PostgreSQL's own rule. Only
// such names are ever put into a replication command.
func ValidSlotName(name string) bool {
	if len(name) == 0 || len(name) > 63 {
		return false
	}
	for _, c := range []byte(name) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// EnsureSlot makes sure the permanent pgoutput logical slot name exists in
// conn's database and can stream, creating it when missing. Changes
// committed before a slot's creation are not in its stream: a caller that
// must backfill in that case calls ReadSlot first to learn whether the slot
// existed.
//
// When the slot is missing and all max_replication_slots are taken it returns
// ErrNoFreeSlot; a slot that exists with another plugin, type or database
// gives ErrSlotMismatch; an invalidated slot (wal_status lost,
// invalidation_reason, conflicting) gives ErrSlotInvalidated. Concurrent
// calls for the same name are safe: one creates, the others find it. conn
// must not be used concurrently.
func EnsureSlot(ctx context.Context, conn *pgx.Conn, name string) error {
	if !ValidSlotName(name) {
		return fmt.Errorf("slot name %q: use 1 to 63 lower-case letters, digits and underscores", name)
	}
	var db string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		return fmt.Errorf("slot %s: %w", name, err)
	}
	for attempt := 0; ; attempt++ {
		slot, found, err := ReadSlot(ctx, conn, name)
		if err != nil {
			return err
		}
		if found {
			return slot.check(db)
		}
		if attempt > 0 {
			return fmt.Errorf("%w: slot %s vanished right after it was created", ErrNoSlot, name)
		}
		if err := createSlot(ctx, conn, name); err != nil {
			return err
		}
	}
}

// ReadSlot returns the replication slot name as pg_replication_slots shows
// it; found is false when there is no such slot. It reads only; conn must
// not be used concurrently.
func ReadSlot(ctx context.Context, conn *pgx.Conn, name string) (slot Slot, found bool, err error) {
	var js []byte
	err = conn.QueryRow(ctx, selectSlot+"$1", name).Scan(&js)
	if errors.Is(err, pgx.ErrNoRows) {
		return Slot{}, false, nil
	}
	if err != nil {
		return Slot{}, false, fmt.Errorf("read slot %s: %w", name, err)
	}
	slot, err = parseSlot(js)
	return slot, err == nil, err
}

// createSlot creates the permanent slot after checking that one is free.
// A concurrent creator (42710 duplicate_object) is not an error.
func createSlot(ctx context.Context, conn *pgx.Conn, name string) error {
	var used, limit int
	err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_replication_slots),
		current_setting('max_replication_slots')::int`).Scan(&used, &limit)
	if err != nil {
		return fmt.Errorf("create slot %s: %w", name, err)
	}
	if used >= limit {
		return noFreeSlot(name, used, limit)
	}
	// The third argument, temporary, is false: the slot must survive the
	// session. From PostgreSQL 17 on the fifth, failover, is true: standbys
	// with sync_replication_slots = on keep a copy, so that the slot is there
	// after a promotion. See
	// https://www.postgresql.org/docs/17/functions-admin.html#FUNCTIONS-REPLICATION
	// and https://www.postgresql.org/docs/17/logicaldecoding-explanation.html#LOGICALDECODING-REPLICATION-SLOTS-SYNCHRONIZATION
	sql := "SELECT pg_create_logical_replication_slot($1, $2, false)"
	if FailoverSlots(conn.PgConn()) {
		sql = "SELECT pg_create_logical_replication_slot($1, $2, false, false, true)"
	}
	_, err = conn.Exec(ctx, sql, name, Plugin)
	switch pgerr.SQLState(err) {
	case "", pgerr.DuplicateObject:
		return nil
	case pgerr.ConfigurationLimitExceeded:
		return noFreeSlot(name, limit, limit)
	case pgerr.InsufficientPrivilege:
		return explain(err, conn.Config().User)
	case pgerr.ObjectNotInPrerequisiteState:
		return fmt.Errorf("create slot %s: %w (is wal_level logical? run Preflight)", name, err)
	}
	return fmt.Errorf("create slot %s: %w", name, err)
}

func noFreeSlot(name string, used, limit int) error {
	return fmt.Errorf("%w: cannot create slot %s, %d of max_replication_slots = %d are in use; drop an unused slot (SELECT pg_drop_replication_slot('name') — see pg_replication_slots) or raise max_replication_slots and restart PostgreSQL",
		ErrNoFreeSlot, name, used, limit)
}

// FailoverVersion is the first server_version_num with failover slots.
const FailoverVersion = 170000

// FailoverSlots reports whether the server behind conn has failover slots
// (PostgreSQL 17+), from the server_version the server reported at login.
func FailoverSlots(conn *pgconn.PgConn) bool {
	return ServerVersion(conn) >= FailoverVersion
}

// ServerVersion is the major version of conn's server as a
// server_version_num (170000 for "17.2", "17.2 (Debian 17.2-1)" or
// "17beta1"), from the server_version it reported at login; 0 when it
// cannot be read.
func ServerVersion(conn *pgconn.PgConn) int {
	major := 0
	for _, c := range []byte(conn.ParameterStatus("server_version")) {
		if c < '0' || c > '9' || major > 1000 {
			break
		}
		major = major*10 + int(c-'0')
	}
	return major * 10000
}
