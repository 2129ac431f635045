package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/pgimageai/pgimageai/bridge/leader"
	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/cmd/pgimageai/internal/render"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/state"
)

// readGroups reads every rule group and its slot.
// The slot of another group is its default one (groupSlot).
func readGroups(ctx context.Context, source, target *database, group, slot string) ([]render.GroupStatus, error) {
	counts, err := state.RuleGroups(ctx, source.conn)
	if err != nil {
		return nil, source.explain("read rule groups", err)
	}
	groups := make([]render.GroupStatus, len(counts))
	for i, c := range counts {
		groups[i] = render.GroupStatus{Group: c.Group, Rules: c.Rules, Enabled: c.Enabled}
	}
	for i := range groups {
		g := &groups[i]
		if g.Slot = slot; g.Group != group {
			if g.Slot, err = groupSlot(ctx, source, target, g.Group); err != nil {
				return nil, err
			}
		}
		s, err := readSlotStatus(ctx, source, g.Slot)
		if err != nil {
			return nil, err
		}
		g.Found, g.Active, g.Lag = s.Found, s.Active, s.Lag()
	}
	return groups, nil
}

// status prints the slot, checkpoint, rules, backfills and open errors.
func status(ctx context.Context, c config, stdout, _ io.Writer) error {
	source, target, closeAll, err := connectBoth(ctx, c)
	if err != nil {
		return err
	}
	defer closeAll()
	if err := c.resolveSlotOn(ctx, source, target); err != nil {
		return err
	}
	r, err := readStatus(ctx, source, target, c.Slot)
	if err != nil {
		return err
	}
	if r.Groups, err = readGroups(ctx, source, target, c.Group, c.Slot); err != nil {
		return err
	}
	return render.WriteStatus(stdout, r, c.Query.Format)
}

// readStatus gathers the status: the slot and the rules from the source, the
// rest from the target.
func readStatus(ctx context.Context, source, target *database, slot string) (render.Status, error) {
	var r render.Status
	var err error
	if r.Slot, err = readSlotStatus(ctx, source, slot); err != nil {
		return r, err
	}
	cp, found, err := readCheckpoint(ctx, target, slot)
	if err != nil {
		return r, err
	}
	if found {
		r.Checkpoint = &cp
	}
	if r.Rules, err = readRules(ctx, source, target); err != nil {
		return r, err
	}
	if r.Lanes, err = readLanes(ctx, target, slot); err != nil {
		return r, err
	}
	if r.Backfills, err = readBackfills(ctx, target); err != nil {
		return r, err
	}
	if r.Batches, err = state.Batches(ctx, target.conn); err != nil {
		return r, target.explain("read batches", err)
	}
	if r.OpenErrors, err = countOpenErrors(ctx, target); err != nil {
		return r, err
	}
	if r.ErrorCaps, err = readErrorCaps(ctx, target); err != nil {
		return r, err
	}
	if r.Usage, err = readUsage(ctx, target); err != nil {
		return r, err
	}
	if r.Budgets, err = readBudgets(ctx, source, target); err != nil {
		return r, err
	}
	if r.Models, err = state.ModelPaces(ctx, target.conn, slot); err != nil {
		return r, target.explain("read model pacing", err)
	}
	if r.Outages, err = readOutages(ctx, target, slot); err != nil {
		return r, err
	}
	if r.Gaps, err = readGaps(ctx, target, slot); err != nil {
		return r, err
	}
	if r.Versions, r.Switches, r.History, err = readVersions(ctx, source, target); err != nil {
		return r, err
	}
	return r, nil
}

func readSlotStatus(ctx context.Context, source *database, name string) (render.SlotStatus, error) {
	s := render.SlotStatus{Slot: replication.Slot{Name: name}, ServerVersion: replication.ServerVersion(source.conn.PgConn())}
	owner, leads, err := leader.Owner(ctx, source.conn, name)
	if err != nil {
		return s, source.explain("read the leader lock", err)
	}
	if leads {
		s.Leader = &owner
	}
	if s.Squatters, err = leader.Squatters(ctx, source.conn, name); err != nil {
		return s, source.explain("read the leader lock", err)
	}
	slot, found, err := replication.ReadSlot(ctx, source.conn, name)
	if err != nil {
		return s, fmt.Errorf("%s database %s: %w", source.role, source.where, err)
	}
	if !found {
		return s, nil
	}
	u, found, err := replication.ReadSlotUsage(ctx, source.conn, name)
	if err != nil {
		return s, source.explain("read slot "+name, err)
	}
	if !found {
		return s, nil // dropped between the two queries
	}
	s.ActivePID, s.HasSafeWALSize, s.SafeWALSize, s.CurrentLSN = u.ActivePID, u.HasSafeWALSize, u.SafeWALSize, u.CurrentLSN
	s.Slot, s.Found = slot, true
	return s, nil
}

// readCheckpoint reads the checkpoint stored for slot; found is false when
// there is none.
func readCheckpoint(ctx context.Context, target *database, slot string) (cp state.Checkpoint, found bool, err error) {
	cp, found, err = state.ReadCheckpoint(ctx, target.conn, slot)
	if err != nil {
		return cp, false, target.explain("read checkpoint", err)
	}
	return cp, found, nil
}

// readRules reads the rules from the source and the reasons of the invalid
// ones from the target's open invalid_rule errors.
func readRules(ctx context.Context, source, target *database) ([]state.RuleListing, error) {
	rules, err := state.AllRules(ctx, source.conn)
	if err != nil {
		return nil, source.explain("read rules", err)
	}
	invalid, err := state.InvalidDetails(ctx, target.conn)
	if err != nil {
		return nil, target.explain("read invalid rules", err)
	}
	for i := range rules {
		rules[i].Invalid = invalid[rules[i].Name]
	}
	return rules, nil
}

func readLanes(ctx context.Context, target *database, slot string) ([]state.LaneRow, error) {
	lanes, err := state.Lanes(ctx, target.conn, slot)
	if err != nil {
		return nil, target.explain("read lanes", err)
	}
	return lanes, nil
}

func readBackfills(ctx context.Context, target *database) ([]state.BackfillRow, error) {
	b, err := state.Backfills(ctx, target.conn)
	if err != nil {
		return nil, target.explain("read backfills", err)
	}
	return b, nil
}

func countOpenErrors(ctx context.Context, target *database) ([]state.ErrorCount, error) {
	counts, err := state.CountOpenErrors(ctx, target.conn)
	if err != nil {
		return nil, target.explain("count open errors", err)
	}
	return counts, nil
}

// readGaps reads the slot's gaps not cleaned yet and those of the last
// gapWindow.
func readGaps(ctx context.Context, target *database, slot string) ([]state.Gap, error) {
	gaps, err := state.Gaps(ctx, target.conn, slot, time.Now().Add(-gapWindow))
	if err != nil {
		return nil, target.explain("read slot gaps", err)
	}
	return gaps, nil
}

// readOutages reads the models' circuits of slot and the parked rows.
func readOutages(ctx context.Context, target *database, slot string) (render.OutageStatus, error) {
	var o render.OutageStatus
	hs, err := state.ModelHealths(ctx, target.conn, slot)
	if err != nil {
		return o, target.explain("read the models' health", err)
	}
	if o.Parked, err = state.ParkedCounts(ctx, target.conn, nil); err != nil {
		return o, target.explain("count the parked rows", err)
	}
	byModel := map[string]*render.ModelHealth{}
	for _, h := range hs {
		byModel[h.Model] = &render.ModelHealth{ModelHealth: h}
	}
	for _, c := range o.Parked {
		m := byModel[c.Model]
		if m == nil {
			m = &render.ModelHealth{ModelHealth: state.ModelHealth{Model: c.Model}}
			byModel[c.Model] = m
		}
		m.Parked += c.Rows
		if m.OldestParked.IsZero() || c.Oldest.Before(m.OldestParked) {
			m.OldestParked = c.Oldest
		}
	}
	for _, m := range byModel {
		o.Models = append(o.Models, *m)
	}
	sort.Slice(o.Models, func(i, j int) bool { return o.Models[i].Model < o.Models[j].Model })
	return o, nil
}

func readErrorCaps(ctx context.Context, target *database) ([]state.ErrorCap, error) {
	caps, err := state.DroppedErrors(ctx, target.conn)
	if err != nil {
		return nil, target.explain("read pgimageai.error_counts", err)
	}
	return caps, nil
}

func readUsage(ctx context.Context, target *database) ([]state.UsageRow, error) {
	u, err := state.RecentUsage(ctx, target.conn, render.UsageDays)
	if err != nil {
		return nil, target.explain("read usage", err)
	}
	return u, nil
}

// readBudgets reads the models with a daily cap (source) and what they
// spent today (target).
func readBudgets(ctx context.Context, source, target *database) ([]render.BudgetStatus, error) {
	models, err := state.Models(ctx, source.conn)
	if err != nil {
		return nil, source.explain("read models", err)
	}
	spent, day, err := state.CountedToday(ctx, target.conn) // as the bridge counts: usage and the requests waiting in batches
	if err != nil {
		return nil, target.explain("read usage", err)
	}
	var out []render.BudgetStatus
	for _, m := range models {
		opts, err := provider.ParseOptions(m.Options)
		if err != nil {
			continue // an invalid model is reported with its rules
		}
		c := rules.CapOf(opts)
		if c.Unlimited() {
			continue
		}
		s := spent[m.Name]
		out = append(out, render.BudgetStatus{Model: m.Name, Day: day, Calls: s.Calls, Tokens: s.Tokens,
			MaxCalls: c.Calls, MaxTokens: c.Tokens})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out, nil
}

// gapWindow is how far back status lists gaps already cleaned up.
const gapWindow = 7 * 24 * time.Hour
