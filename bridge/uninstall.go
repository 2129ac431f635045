package bridge

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge/leader"
	"github.com/pgimageai/pgimageai/migrations"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/state"
)

// Installed is one rule group's slot and publication on the source, as
// pgimageai uninstall finds them.
type Installed struct {
	Group, Slot, Publication string
	SlotFound                bool
	SlotActive               bool  // a walsender streams it: a pgimageai run is up
	RetainedBytes            int64 // WAL the slot keeps on the server
	PublicationFound         bool
}

// UninstallPlan is what pgimageai uninstall drops: the groups' slots and
// publications and, with Schema, schema pgimageai on the source and (when it
// is another database) on the target. CreatedTargets are the tables the
// bridge created; they hold the results and are never dropped.
type UninstallPlan struct {
	Groups         []Installed
	Schema         bool
	SchemaSource   bool // schema pgimageai exists on the source
	SchemaTarget   bool // … on the target, when it is another database
	SameDatabase   bool // the target is the source
	CreatedTargets []string
}

// Names of a group to uninstall: its slot and publication.
type Names struct{ Group, Slot, Publication string }

// PlanUninstall reads what uninstalling groups (and, with dropSchema, the
// schema) would drop. It changes nothing.
func PlanUninstall(ctx context.Context, src, tgt *pgx.Conn, groups []Names, dropSchema bool) (UninstallPlan, error) {
	plan := UninstallPlan{Schema: dropSchema, SameDatabase: src == tgt}
	for _, g := range groups {
		in := Installed{Group: g.Group, Slot: g.Slot, Publication: g.Publication}
		slot, found, err := replication.ReadSlot(ctx, src, g.Slot)
		if err != nil {
			return plan, err
		}
		if found {
			var db string
			if err := src.QueryRow(ctx, "SELECT pg_catalog.current_database()").Scan(&db); err != nil {
				return plan, fmt.Errorf("read the current database: %w", err)
			}
			if slot.Database != db {
				return plan, fmt.Errorf("%w: slot %s belongs to database %q, not to this one (%q): uninstall it from there",
					replication.ErrSlotMismatch, g.Slot, slot.Database, db)
			}
			usage, _, err := replication.ReadSlotUsage(ctx, src, g.Slot)
			if err != nil {
				return plan, err
			}
			in.SlotFound, in.SlotActive, in.RetainedBytes = true, usage.Active, usage.RetainedBytes
		}
		if err := src.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_catalog.pg_publication WHERE pubname = $1)", g.Publication).Scan(&in.PublicationFound); err != nil {
			return plan, fmt.Errorf("read publication %s: %w", g.Publication, err)
		}
		plan.Groups = append(plan.Groups, in)
	}
	var err error
	if plan.SchemaSource, err = hasSchema(ctx, src); err != nil {
		return plan, err
	}
	if !plan.SameDatabase {
		if plan.SchemaTarget, err = hasSchema(ctx, tgt); err != nil {
			return plan, err
		}
	}
	if plan.SchemaTarget || plan.SameDatabase && plan.SchemaSource {
		if plan.CreatedTargets, err = state.CreatedTargets(ctx, tgt); err != nil {
			return plan, err
		}
	}
	return plan, nil
}

func hasSchema(ctx context.Context, conn *pgx.Conn) (bool, error) {
	var ok bool
	err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_catalog.pg_namespace WHERE nspname = 'pgimageai')").Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("read schema pgimageai: %w", err)
	}
	return ok, nil
}

// Uninstall drops what plan lists. It first takes the leader lock of every
// slot (held until src closes), so that no pgimageai run streams, writes or
// takes over while it drops; a slot that a bridge leads or a process holds is
// refused with what to do (replication.ErrSlotActive) before anything is
// dropped. Slots go first (a slot dropped retains no WAL), then publications,
// then the schema, on the target first.
func Uninstall(ctx context.Context, src, tgt *pgx.Conn, plan UninstallPlan) error {
	for _, g := range plan.Groups {
		locked, err := leader.TryOn(ctx, src, g.Slot)
		if err != nil {
			return err
		}
		if !locked {
			return fmt.Errorf("%w: a pgimageai run on slot %s holds its leader lock (%s); stop it (and its standbys) first, nothing was dropped",
				replication.ErrSlotActive, g.Slot, leader.Describe(ctx, src, g.Slot))
		}
	}
	for _, g := range plan.Groups {
		if g.SlotFound {
			if _, err := replication.DropSlot(ctx, src, g.Slot); err != nil {
				return err
			}
		}
	}
	for _, g := range plan.Groups {
		if g.PublicationFound {
			if _, err := replication.DropPublication(ctx, src, g.Publication); err != nil {
				return err
			}
		}
	}
	if !plan.Schema {
		return nil
	}
	if !plan.SameDatabase {
		if _, err := migrations.Drop(ctx, tgt); err != nil {
			return fmt.Errorf("target: %w", err)
		}
	}
	if _, err := migrations.Drop(ctx, src); err != nil {
		return fmt.Errorf("source: %w", err)
	}
	return nil
}

// ErrNotConfirmed: pgimageai uninstall was run without --yes; it listed what
// it would drop and dropped nothing.
var ErrNotConfirmed = errors.New("not confirmed")
