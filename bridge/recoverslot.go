package bridge

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge/leader"
	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/internal/pgconnect"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

// ErrSlotHealthy: RecoverSlot was asked to recover a slot that can still
// stream, without Force. Recovering it would backfill every rule for nothing.
var ErrSlotHealthy = errors.New("replication slot is healthy")

// RecoverConfig configures RecoverSlot: the settings of the bridge whose
// slot is recovered.
type RecoverConfig struct {
	SourceDSN   string
	TargetDSN   string // "" = SourceDSN
	Slot        string
	Publication string
	// Force recovers a slot that can still stream, too.
	Force bool
	// Group is the rule group the slot streams; "" = the default group.
	Group string
}

// Recovery is what RecoverSlot found and did.
type Recovery struct {
	Old      replication.Slot // the slot as it was; only Name when it did not exist
	Found    bool             // the old slot existed
	Problem  error            // why the old slot could not stream; nil when it could (Force)
	New      replication.Slot // the slot as re-created
	Progress state.Progress   // the checkpoint and backfill states forgotten
	Rules    []string         // the enabled rules: each backfills at the next run
	Targets  []OrphanCleanup  // one per target table of an enabled rule
}

// OrphanCleanup is what RecoverSlot did to one target table.
type OrphanCleanup struct {
	Table   string   // as the rules name it
	Rules   []string // the enabled rules writing to it
	Deleted int64    // rows deleted because their source row is gone
	// Skipped says why nothing was deleted ("write-back", "no such table",
	// or why the rule cannot run); "" when the table was checked.
	Skipped string
}

// RecoverSlot gets a bridge going again after its slot was invalidated (or
// dropped): changes made while the slot could not stream are lost to it, so
// the bridge starts over from the source's current rows. In order:
//
//  1. It takes pgimageai run's leader lock of the slot for its duration and
//     refuses while a bridge holds it or a process holds the slot
//     (replication.ErrSlotActive) — a running bridge is stopped first — and,
//     unless Force, a slot that can still stream (ErrSlotHealthy).
//  2. In one target transaction it forgets the slot's checkpoint and every
//     backfill state (state.ForgetProgress), and commits it only once the old
//     slot is dropped: if it stops in between, nothing is forgotten and the
//     command can be run again.
//  3. It re-creates the slot at once, before looking at any row. From that
//     consistent point on every change is streamed to the next run; every
//     change before it is reflected in the rows as they are now. The next
//     run backfills every enabled rule from those rows.
//  4. It deletes the target rows whose source row was deleted meanwhile
//     (sink.DeleteOrphans), comparing keys page by page, so the source and
//     target may be different databases. A write-back rule has nothing to
//     delete: its target rows are the source rows.
//
// If step 4 fails, run RecoverSlot again with Force before starting the
// bridge. The leader lock keeps it from running beside a bridge on the same
// slot, or beside itself.
func RecoverSlot(ctx context.Context, cfg RecoverConfig) (Recovery, error) {
	rec := Recovery{Old: replication.Slot{Name: cfg.Slot}}
	if !replication.ValidSlotName(cfg.Slot) {
		return rec, fmt.Errorf("slot name %q: use 1 to 63 lower-case letters, digits and underscores", cfg.Slot)
	}
	if cfg.TargetDSN == "" {
		cfg.TargetDSN = cfg.SourceDSN
	}
	src, err := pgconnect.Connect(ctx, cfg.SourceDSN)
	if err != nil {
		return rec, fmt.Errorf("connect to source: %w", err)
	}
	defer src.Close(context.WithoutCancel(ctx))
	tgt, err := pgconnect.Connect(ctx, cfg.TargetDSN)
	if err != nil {
		return rec, fmt.Errorf("connect to target: %w", err)
	}
	defer tgt.Close(context.WithoutCancel(ctx))

	// pgimageai run's leader lock, held until src closes: while it is ours no
	// bridge streams or writes for this slot (a standby waits). A bridge
	// between two connections of its stream holds it too, although its slot
	// looks inactive then.
	locked, err := leader.TryOn(ctx, src, cfg.Slot)
	if err != nil {
		return rec, err
	}
	if !locked {
		owner := leader.Describe(ctx, src, cfg.Slot)
		return rec, fmt.Errorf("%w: a pgimageai run on slot %s holds its leader lock (%s); stop it first (on an invalidated slot it stops by itself)",
			replication.ErrSlotActive, cfg.Slot, owner)
	}
	if err := checkOldSlot(ctx, src, cfg, &rec); err != nil {
		return rec, err
	}
	var pubExists bool
	if err := src.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_publication WHERE pubname = $1)", cfg.Publication).Scan(&pubExists); err != nil {
		return rec, fmt.Errorf("read publication %s: %w", cfg.Publication, err)
	}
	if !pubExists {
		// The slot must not be older than its publication (pgoutput reads
		// the publication as of each change), and only the bridge knows
		// which tables it holds.
		return rec, fmt.Errorf("publication %s does not exist in the source database: pgimageai run has never set this source up, so there is nothing to recover; check --publication, or start pgimageai run",
			pgx.Identifier{cfg.Publication}.Sanitize())
	}
	enabled, err := enabledRules(ctx, src, rules.GroupOrDefault(cfg.Group))
	if err != nil {
		return rec, err
	}
	for _, r := range enabled {
		rec.Rules = append(rec.Rules, r.Name)
	}

	// Step 2: forget the progress, committed only once the old slot is gone.
	tx, err := tgt.Begin(ctx)
	if err != nil {
		return rec, fmt.Errorf("target: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // a no-op after Commit
	if rec.Progress, err = state.ForgetProgress(ctx, tx, cfg.Slot, rec.Rules); err != nil {
		return rec, fmt.Errorf("%w (run pgimageai migrate on the target first?)", err)
	}
	if rec.Found {
		if _, err := replication.DropSlot(ctx, src, cfg.Slot); err != nil {
			return rec, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return rec, fmt.Errorf("forget the checkpoint and backfills of slot %s (the slot is dropped already: run pgimageai recover-slot again): %w", cfg.Slot, err)
	}

	// Step 3: the new consistent point, before any row is looked at.
	if err := replication.EnsureSlot(ctx, src, cfg.Slot); err != nil {
		return rec, fmt.Errorf("%w (the old slot is dropped and the progress forgotten: pgimageai run re-creates the slot and backfills, but results of rows deleted meanwhile stay; run pgimageai recover-slot again to delete them)", err)
	}
	if rec.New, _, err = replication.ReadSlot(ctx, src, cfg.Slot); err != nil {
		return rec, err
	}

	// Step 4: the results of rows deleted while the slot was lost.
	if rec.Targets, err = deleteOrphans(ctx, src, tgt, enabled); err != nil {
		return rec, fmt.Errorf("%w (the slot is re-created: run pgimageai recover-slot --force to finish before pgimageai run)", err)
	}
	return rec, nil
}

// checkOldSlot reads the slot into rec and refuses the states that must not
// be recovered.
func checkOldSlot(ctx context.Context, src *pgx.Conn, cfg RecoverConfig, rec *Recovery) error {
	old, found, err := replication.ReadSlot(ctx, src, cfg.Slot)
	if err != nil {
		return err
	}
	if !found {
		return nil
	}
	rec.Old, rec.Found = old, true
	if old.Active {
		var pid *int32
		_ = src.QueryRow(ctx, "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1", cfg.Slot).Scan(&pid)
		holder := "a process"
		if pid != nil {
			holder = fmt.Sprintf("process %d", *pid)
		}
		return fmt.Errorf("%w: slot %s is held by %s, most likely a running pgimageai run; stop it first (a bridge on an invalidated slot stops by itself)",
			replication.ErrSlotActive, cfg.Slot, holder)
	}
	var db string
	if err := src.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		return fmt.Errorf("slot %s: %w", cfg.Slot, err)
	}
	rec.Problem = old.Check(db)
	switch {
	case errors.Is(rec.Problem, replication.ErrSlotMismatch):
		return rec.Problem // not a slot of ours: never dropped
	case rec.Problem == nil && !cfg.Force:
		return fmt.Errorf("%w: slot %s can stream (wal_status %s), so there is nothing to recover; recovering it anyway makes every rule backfill again — pass --force for that",
			ErrSlotHealthy, cfg.Slot, old.WALStatus)
	}
	return nil
}

// enabledRules reads the enabled rules of group from the source.
func enabledRules(ctx context.Context, src *pgx.Conn, group string) ([]state.RuleRow, error) {
	rs, err := state.Rules(ctx, src, group, true)
	if err != nil {
		return nil, fmt.Errorf("%w (run pgimageai migrate first?)", err)
	}
	return rs, nil
}

// deleteOrphans runs sink.DeleteOrphans on each target table of the rules,
// once per table. A rule that cannot run is reported, not fatal: its target
// is what the bridge left, and the bridge reports the rule itself.
func deleteOrphans(ctx context.Context, src, tgt *pgx.Conn, enabled []state.RuleRow) ([]OrphanCleanup, error) {
	var out []OrphanCleanup
	seen := map[string]int{} // target table as named → index in out
	for _, rr := range enabled {
		if i, ok := seen[rr.TargetTable]; ok {
			out[i].Rules = append(out[i].Rules, rr.Name)
			continue
		}
		seen[rr.TargetTable] = len(out)
		c := OrphanCleanup{Table: rr.TargetTable, Rules: []string{rr.Name}}
		source, err := catalog.Lookup(ctx, src, rr.SourceTable)
		var target *catalog.Table
		if err == nil {
			target, err = catalog.Lookup(ctx, tgt, rr.TargetTable)
		}
		switch {
		case errors.Is(err, catalog.ErrNoTable) && source != nil:
			c.Skipped = "no such table yet"
		case err != nil && (src.IsClosed() || tgt.IsClosed()):
			return out, err
		case err != nil:
			c.Skipped = err.Error()
		case target.OID == source.OID && rules.SameDatabase(src, tgt):
			c.Skipped = "write-back"
		case len(source.Key()) == 0:
			c.Skipped = fmt.Sprintf("source table %s has no key (its replica identity carries none)", source)
		default:
			c.Table = target.String()
			if c.Deleted, err = sink.DeleteOrphans(ctx, src, tgt, source, target); err != nil {
				return out, err
			}
		}
		out = append(out, c)
	}
	return out, nil
}
