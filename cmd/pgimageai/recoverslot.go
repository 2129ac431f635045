package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/pgimageai/pgimageai/bridge"
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
	_, err = io.WriteString(stdout, recoveryText(rec))
	return err
}

// usageError is err with exit code 2 (errUsage) but without its text.
type usageError struct{ err error }

func (e usageError) Error() string   { return e.err.Error() }
func (e usageError) Unwrap() []error { return []error{errUsage, e.err} }

// recoveryText says what RecoverSlot found and did, one line per step.
func recoveryText(rec bridge.Recovery) string {
	var b bytes.Buffer
	name := rec.Old.Name
	switch {
	case !rec.Found:
		fmt.Fprintf(&b, "slot %s did not exist\n", name)
	case rec.Problem != nil:
		fmt.Fprintf(&b, "slot %s could not stream (wal_status %s%s)\n", name, rec.Old.WALStatus, invalidation(rec))
	default:
		fmt.Fprintf(&b, "slot %s could stream (wal_status %s); recovered because of --force\n", name, rec.Old.WALStatus)
	}
	if rec.Found {
		fmt.Fprintf(&b, "dropped slot %s and re-created it at %s\n", name, rec.New.ConfirmedFlushLSN)
	} else {
		fmt.Fprintf(&b, "created slot %s at %s\n", name, rec.New.ConfirmedFlushLSN)
	}
	cp := "no checkpoint was stored"
	if rec.Progress.Checkpoint != nil {
		cp = "forgot the checkpoint " + *rec.Progress.Checkpoint
	}
	fmt.Fprintf(&b, "%s, %s and %s\n", cp, plural(rec.Progress.Lanes, "lane checkpoint"), plural(rec.Progress.Backfills, "backfill state"))
	for _, t := range rec.Targets {
		rules := strings.Join(t.Rules, ", ")
		if t.Skipped != "" {
			fmt.Fprintf(&b, "%s (rules %s): nothing deleted: %s\n", t.Table, rules, t.Skipped)
			continue
		}
		fmt.Fprintf(&b, "%s (rules %s): deleted %s whose source row no longer exists\n", t.Table, rules, plural(t.Deleted, "row"))
	}
	if len(rec.Rules) == 0 {
		b.WriteString("no rule is enabled: nothing will backfill\n")
	} else {
		fmt.Fprintf(&b, "every enabled rule (%s) backfills when pgimageai run starts; start it now\n", strings.Join(rec.Rules, ", "))
	}
	return b.String()
}

func invalidation(rec bridge.Recovery) string {
	switch {
	case rec.Old.InvalidationReason != "":
		return ", invalidation_reason " + rec.Old.InvalidationReason
	case rec.Old.Conflicting:
		return ", conflicting with recovery"
	}
	return ""
}

func plural(n int64, what string) string {
	s := strconv.FormatInt(n, 10) + " " + what
	if n != 1 {
		s += "s"
	}
	return s
}

// commandHelp is what a command's --help says after its flags.
var commandHelp = map[string]string{"recover-slot": recoverSlotHelp, "health": healthHelp, "uninstall": uninstallHelp}
