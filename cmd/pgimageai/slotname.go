package main

import (
	"context"

	"github.com/pgimageai/pgimageai/bridge"
	"github.com/pgimageai/pgimageai/internal/pgerr"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/state"
)

// resolveSlot sets c.Slot, when the operator named none (no --slot, no
// PGIMAGEAI_SLOT), to the default of c's group on its source database
// (replication.ResolveSlotName): the name of an existing installation's slot,
// or one that carries the database. Every command that uses the slot's name
// calls it first, after its own checks of its flags.
func (c *config) resolveSlot(ctx context.Context) error {
	if !c.slotDefault {
		return nil
	}
	source, target, closeAll, err := connectBoth(ctx, *c)
	if err != nil {
		return err
	}
	defer closeAll()
	return c.resolveSlotOn(ctx, source, target)
}

// resolveSlotOn is resolveSlot on connections the command has open.
func (c *config) resolveSlotOn(ctx context.Context, source, target *database) error {
	if !c.slotDefault {
		return nil
	}
	name, err := groupSlot(ctx, source, target, c.Group)
	if err != nil {
		return err
	}
	c.Slot, c.slotDefault = name, false
	return nil
}

// groupSlot is the default slot of group on source, whose checkpoints are
// stored in target.
func groupSlot(ctx context.Context, source, target *database, group string) (string, error) {
	inUse := func(legacy string) (bool, error) {
		_, found, err := state.ReadCheckpoint(ctx, target.conn, legacy)
		switch pgerr.SQLState(err) {
		case pgerr.UndefinedTable, pgerr.InvalidSchemaName:
			return false, nil // not migrated yet: nothing in use
		}
		if err != nil {
			return false, target.explain("read the checkpoint of slot "+legacy, err)
		}
		return found, nil
	}
	name, err := replication.ResolveSlotName(ctx, source.conn, group, bridge.DefaultGroup, inUse)
	if err != nil {
		return "", source.explain("resolve the default slot name", err)
	}
	return name, nil
}
