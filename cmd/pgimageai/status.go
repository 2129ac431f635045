package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/pgimageai/pgimageai/bridge/leader"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/state"
)

// statusReport is what `pgimageai status` shows: readStatus gathers it,
// writeStatus renders it.
type statusReport struct {
	Slot       slotStatus
	Checkpoint *checkpoint // nil: none stored for the slot
	Rules      []ruleStatus
	Groups     []groupStatus // every rule group, ordered by name
	Lanes      []laneStatus  // ordered by lane
	Backfills  []backfill
	Batches    []batchRow      // of Batch API backfills, by rule and seq
	OpenErrors []errorCount    // ordered by rule, then reason
	ErrorCaps  []errorCap      // the rules with failures their cap did not record, by name
	Usage      []usageRow      // the last usageDays UTC days, newest first
	Budgets    []budgetStatus  // the models with a daily cap, by name
	Models     []modelPace     // the pacing of the models, as the slot's leader last stored it
	Outages    outageStatus    // the models seen down and the parked rows
	Gaps       []slotGap       // changes the slot skipped: not cleaned yet, or of the last week
	Versions   []resultVersion // stored results by rule and version (side rules aside)
	Switches   []switchStatus  // running switches, by rule
	History    []switchEnd     // the last switches that ended, newest first
}

// modelPace is a row of pgimageai.model_pace.
type modelPace = state.ModelPace

// paceStale is how old stored pacing may be before status calls it stale:
// a running leader stores it every 5 seconds.
const paceStale = 30 * time.Second

// slotStatus is the replication slot on the source and the WAL position it
// lags behind.
type slotStatus struct {
	replication.Slot       // Name always; the rest only when Found
	Found            bool  // the slot exists
	ActivePID        int32 // the walsender holding the slot; 0 when inactive
	HasSafeWALSize   bool  // the server reports safe_wal_size (PostgreSQL 13+)
	// SafeWALSize is nil when no limit applies (max_slot_wal_keep_size = -1)
	// or the slot has lost its WAL.
	SafeWALSize *int64
	// CurrentLSN is pg_current_wal_lsn(), or pg_last_wal_replay_lsn() on a standby.
	CurrentLSN replication.LSN
	// Leader is the pgimageai run holding the slot's leader lock; nil when
	// none does (stopped, or between two leaders).
	Leader *leader.Info
	// Squatters hold the advisory key of the slot's leader lock without
	// leading it: sessions of other roles (ignored by the bridge) or an
	// older pgimageai.
	Squatters []leader.Holder
	// ServerVersion is the source's server_version_num (major only).
	ServerVersion int
}

// Lag is the WAL in bytes that the slot has not confirmed yet.
func (s slotStatus) Lag() uint64 {
	if s.CurrentLSN <= s.ConfirmedFlushLSN {
		return 0
	}
	return uint64(s.CurrentLSN - s.ConfirmedFlushLSN)
}

// checkpoint is the position up to which the target holds every change.
type checkpoint = state.Checkpoint

// ruleStatus is a row of pgimageai.rules with the reason it cannot run, if any.
type ruleStatus = state.RuleListing

// Rule states as status shows them.
const (
	ruleValid    = "valid"
	ruleInvalid  = "invalid"
	ruleDisabled = "disabled"
)

// ruleState is valid, invalid or disabled (the bridge checks enabled rules only).
func ruleState(r ruleStatus) string {
	switch {
	case !r.Enabled:
		return ruleDisabled
	case r.Invalid != "":
		return ruleInvalid
	}
	return ruleValid
}

// groupStatus is a rule group and the slot that streams it: this run's slot
// for its own group, the default name (pgimageai_GROUP) for the others.
type groupStatus struct {
	Group          string
	Rules, Enabled int64
	Slot           string
	Found, Active  bool
	Lag            uint64
}

// readGroups reads every rule group and its slot.
// The slot of another group is its default one (groupSlot).
func readGroups(ctx context.Context, source, target *database, group, slot string) ([]groupStatus, error) {
	counts, err := state.RuleGroups(ctx, source.conn)
	if err != nil {
		return nil, source.explain("read rule groups", err)
	}
	groups := make([]groupStatus, len(counts))
	for i, c := range counts {
		groups[i] = groupStatus{Group: c.Group, Rules: c.Rules, Enabled: c.Enabled}
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

// laneStatus is a row of pgimageai.lane_checkpoints: how far the rules that
// write one target table have applied the stream.
type laneStatus = state.LaneRow

// laneLag is the WAL in bytes that the lane may still have to apply: the
// current LSN minus the greater of its own position and the slot's
// confirmed one (below which every lane has applied everything). An idle
// lane beside a busy one shows the busy one's lag: it is an upper bound.
func laneLag(l laneStatus, s slotStatus) uint64 {
	at := max(l.LSN, s.ConfirmedFlushLSN)
	if !s.Found || s.CurrentLSN <= at {
		return 0
	}
	return uint64(s.CurrentLSN - at)
}

// batchRow is a row of pgimageai.backfill_batches.
type batchRow = state.BatchRow

// backfill is a row of pgimageai.backfills.
type backfill = state.BackfillRow

// errorCount is the number of open errors of one rule with one reason.
type errorCount = state.ErrorCount

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
	return writeStatus(stdout, r, c.Query.Format)
}

// readStatus gathers the status: the slot and the rules from the source, the
// rest from the target.
func readStatus(ctx context.Context, source, target *database, slot string) (statusReport, error) {
	var r statusReport
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

func readSlotStatus(ctx context.Context, source *database, name string) (slotStatus, error) {
	s := slotStatus{Slot: replication.Slot{Name: name}, ServerVersion: replication.ServerVersion(source.conn.PgConn())}
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
func readCheckpoint(ctx context.Context, target *database, slot string) (cp checkpoint, found bool, err error) {
	cp, found, err = state.ReadCheckpoint(ctx, target.conn, slot)
	if err != nil {
		return cp, false, target.explain("read checkpoint", err)
	}
	return cp, found, nil
}

// readRules reads the rules from the source and the reasons of the invalid
// ones from the target's open invalid_rule errors.
func readRules(ctx context.Context, source, target *database) ([]ruleStatus, error) {
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

func readLanes(ctx context.Context, target *database, slot string) ([]laneStatus, error) {
	lanes, err := state.Lanes(ctx, target.conn, slot)
	if err != nil {
		return nil, target.explain("read lanes", err)
	}
	return lanes, nil
}

func readBackfills(ctx context.Context, target *database) ([]backfill, error) {
	b, err := state.Backfills(ctx, target.conn)
	if err != nil {
		return nil, target.explain("read backfills", err)
	}
	return b, nil
}

func countOpenErrors(ctx context.Context, target *database) ([]errorCount, error) {
	counts, err := state.CountOpenErrors(ctx, target.conn)
	if err != nil {
		return nil, target.explain("count open errors", err)
	}
	return counts, nil
}
