package render

import (
	"time"

	"github.com/pgimageai/pgimageai/bridge/leader"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/state"
)

// Status is what `pgimageai status` shows, by concern: cmd/pgimageai reads
// it, WriteStatus renders it.
type Status struct {
	StreamStatus
	Rules []ruleStatus
	WorkStatus
	ModelStatus
	VersionStatus
}

// StreamStatus is where the stream is: the slot, the checkpoint, the rule
// groups' slots, the lanes and the changes the slot skipped.
type StreamStatus struct {
	Slot       SlotStatus
	Checkpoint *checkpoint   // nil: none stored for the slot
	Groups     []GroupStatus // every rule group, ordered by name
	Lanes      []laneStatus  // ordered by lane
	Gaps       []slotGap     // changes the slot skipped: not cleaned yet, or of the last week
}

// WorkStatus is the backfills, their batches and the failures.
type WorkStatus struct {
	Backfills  []backfill
	Batches    []batchRow   // of Batch API backfills, by rule and seq
	OpenErrors []errorCount // ordered by rule, then reason
	ErrorCaps  []errorCap   // the rules with failures their cap did not record, by name
}

// ModelStatus is what the models spent, their caps, pace and outages.
type ModelStatus struct {
	Usage   []usageRow     // the last UsageDays UTC days, newest first
	Budgets []BudgetStatus // the models with a daily cap, by name
	Models  []modelPace    // the pacing of the models, as the slot's leader last stored it
	Outages OutageStatus   // the models seen down and the parked rows
}

// VersionStatus is the stored results by version and the switches.
type VersionStatus struct {
	Versions []resultVersion // stored results by rule and version (side rules aside)
	Switches []SwitchStatus  // running switches, by rule
	History  []switchEnd     // the last switches that ended, newest first
}

// modelPace is a row of pgimageai.model_pace.
type modelPace = state.ModelPace

// paceStale is how old stored pacing may be before status calls it stale:
// a running leader stores it every 5 seconds.
const paceStale = 30 * time.Second

// SlotStatus is the replication slot on the source and the WAL position it
// lags behind.
type SlotStatus struct {
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
func (s SlotStatus) Lag() uint64 {
	if s.CurrentLSN <= s.ConfirmedFlushLSN {
		return 0
	}
	return uint64(s.CurrentLSN - s.ConfirmedFlushLSN)
}

// checkpoint is the position up to which the target holds every change.
type checkpoint = state.Checkpoint

// ruleStatus is a row of pgimageai.rules with the reason it cannot run, if any.
type ruleStatus = state.RuleListing

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

// GroupStatus is a rule group and the slot that streams it: this run's slot
// for its own group, the default name (pgimageai_GROUP) for the others.
type GroupStatus struct {
	Group          string
	Rules, Enabled int64
	Slot           string
	Found, Active  bool
	Lag            uint64
}

// laneStatus is a row of pgimageai.lane_checkpoints: how far the rules that
// write one target table have applied the stream.
type laneStatus = state.LaneRow

// laneLag is the WAL in bytes that the lane may still have to apply: the
// current LSN minus the greater of its own position and the slot's
// confirmed one (below which every lane has applied everything). An idle
// lane beside a busy one shows the busy one's lag: it is an upper bound.
func laneLag(l laneStatus, s SlotStatus) uint64 {
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

// Rule states as status shows them.
const (
	ruleValid    = "valid"
	ruleInvalid  = "invalid"
	ruleDisabled = "disabled"
)
