package main

import (
	"context"
	"errors"
	"io"

	"github.com/pgimageai/pgimageai/bridge"
	"github.com/pgimageai/pgimageai/cmd/pgimageai/internal/render"
)

// recoverSlotHelp is the description of recover-slot in its --help.
const recoverSlotHelp = `
Gets pgimageai run going again after its replication slot was invalidated
(wal_status lost: the server removed WAL the slot still needed, see
max_slot_wal_keep_size) or dropped. Changes made meanwhile cannot be
streamed any more, so the bridge starts over from the source's current rows:

  1. refuses while a process holds the slot (stop pgimageai run first; on an
     invalidated slot it stops by itself), and refuses a slot that can still
     stream unless --force is given (exit code 2);
  2. forgets the slot's checkpoints (its lanes' too) and every backfill state in the target;
  3. drops the slot and re-creates it at once, so that every later change is
     streamed to the next run;
  4. deletes the target rows whose source row no longer exists (write-back
     rules have nothing to delete). Source and target may be different
     databases: keys are compared page by page, never joined.

Then start pgimageai run: every enabled rule backfills, which calls the
providers again for every source row.
`

// recoverSlot drops and re-creates the slot and makes every rule backfill.
func recoverSlot(ctx context.Context, c config, stdout, _ io.Writer) error {
	if err := c.resolveSlot(ctx); err != nil {
		return err
	}
	rec, err := bridge.RecoverSlot(ctx, bridge.RecoverConfig{
		SourceDSN: c.DSN, TargetDSN: c.TargetDSN, Slot: c.Slot, Publication: c.Publication, Force: c.Query.Force, Group: c.Group,
	})
	if errors.Is(err, bridge.ErrSlotHealthy) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	_, err = io.WriteString(stdout, render.RecoveryText(rec))
	return err
}

// usageError is err with exit code 2 (errUsage) but without its text.
type usageError struct{ err error }

func (e usageError) Error() string   { return e.err.Error() }
func (e usageError) Unwrap() []error { return []error{errUsage, e.err} }

// commandHelp is what a command's --help says after its flags.
var commandHelp = map[string]string{"recover-slot": recoverSlotHelp, "health": healthHelp, "uninstall": uninstallHelp}
