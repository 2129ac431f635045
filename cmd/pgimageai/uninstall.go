package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/pgimageai/pgimageai/bridge"
	"github.com/pgimageai/pgimageai/cmd/pgimageai/internal/render"
	"github.com/pgimageai/pgimageai/internal/pgerr"
	"github.com/pgimageai/pgimageai/state"
)

// uninstallHelp is the longer help of pgimageai uninstall.
const uninstallHelp = `
It lists what it would drop, and drops it only with --yes:
  - the rule group's replication slot (--group, --slot), which otherwise keeps WAL on the
    server for as long as it exists, and its publication (--publication);
  - with --drop-schema, every rule group's slot and publication, and schema pgimageai
    with everything in it (rules, models, results, errors, checkpoints, usage) on the
    source and the target.
Target tables, even those the bridge created, are never dropped: they hold the results.
A running pgimageai run (or standby) of a slot is refused: stop it first. Without
--drop-schema the checkpoint stays, so a later pgimageai run sees the gap and backfills.
`

// uninstall drops the slot and publication (and with --drop-schema the
// schema) after listing them.
func uninstall(ctx context.Context, c config, stdout, _ io.Writer) error {
	source, target, closeAll, err := connectBoth(ctx, c)
	if err != nil {
		return err
	}
	defer closeAll()
	if err := c.resolveSlotOn(ctx, source, target); err != nil {
		return err
	}
	groups := []bridge.Names{{Group: c.Group, Slot: c.Slot, Publication: c.Publication}}
	if c.Query.DropSchema {
		others, err := otherGroups(ctx, source, target, c.Group)
		if err != nil {
			return err
		}
		groups = append(groups, others...)
	}
	plan, err := bridge.PlanUninstall(ctx, source.conn, target.conn, groups, c.Query.DropSchema)
	if err != nil {
		return source.explain("read what to uninstall", err)
	}
	fmt.Fprint(stdout, render.UninstallText(plan, c.Query.Yes))
	if !c.Query.Yes {
		return usageError{fmt.Errorf("%w: nothing was dropped; run it again with --yes to drop what is listed", bridge.ErrNotConfirmed)}
	}
	if err := bridge.Uninstall(ctx, source.conn, target.conn, plan); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "done.")
	return nil
}

// otherGroups are the rule groups of the source other than group, each with
// its default slot and publication.
func otherGroups(ctx context.Context, source, target *database, group string) ([]bridge.Names, error) {
	counts, err := state.RuleGroups(ctx, source.conn)
	switch {
	case err != nil && isMissingSchema(err):
		return nil, nil
	case err != nil:
		return nil, source.explain("read rule groups", err)
	}
	var out []bridge.Names
	for _, g := range counts {
		if g.Group == group {
			continue
		}
		slot, err := groupSlot(ctx, source, target, g.Group)
		if err != nil {
			return nil, err
		}
		out = append(out, bridge.Names{Group: g.Group, Slot: slot, Publication: groupName(g.Group)})
	}
	return out, nil
}

func isMissingSchema(err error) bool {
	var coded interface{ SQLState() string }
	if errors.As(err, &coded) {
		switch coded.SQLState() {
		case pgerr.UndefinedTable, pgerr.InvalidSchemaName:
			return true
		}
	}
	return false
}
