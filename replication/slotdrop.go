package replication

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/internal/pgerr"
)

// ErrSlotActive: a process — a running pgimageai run, as a rule — holds the
// slot, so it cannot be dropped.
var ErrSlotActive = errors.New("replication slot is active")

// Check returns why the slot cannot stream for database db — an error
// wrapping ErrSlotMismatch or ErrSlotInvalidated, with advice — or nil when
// it can. It is what EnsureSlot checks of an existing slot.
func (s Slot) Check(db string) error { return s.check(db) }

// DropSlot drops the replication slot name; dropped is false when there was
// no such slot. A slot that a process holds is never taken from it: the
// error wraps ErrSlotActive and names the process. conn must not be used
// concurrently. See
// https://www.postgresql.org/docs/current/functions-admin.html#FUNCTIONS-REPLICATION
func DropSlot(ctx context.Context, conn *pgx.Conn, name string) (dropped bool, err error) {
	if !ValidSlotName(name) {
		return false, fmt.Errorf("slot name %q: use 1 to 63 lower-case letters, digits and underscores", name)
	}
	// pg_drop_replication_slot does not wait for an active slot: it fails
	// with 55006 object_in_use, which is what we want.
	tag, err := conn.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", name)
	switch pgerr.SQLState(err) {
	case "":
		return tag.RowsAffected() > 0, nil
	case pgerr.UndefinedObject: // dropped by someone else meanwhile
		return false, nil
	case pgerr.ObjectInUse:
		return false, fmt.Errorf("%w: slot %s is held by another process (a running pgimageai run?); stop it first: %v", ErrSlotActive, name, err)
	case pgerr.InsufficientPrivilege:
		return false, explain(err, conn.Config().User)
	}
	return false, fmt.Errorf("drop slot %s: %w", name, err)
}
