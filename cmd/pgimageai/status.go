package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/replication"
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
	OpenErrors []errorCount // ordered by rule, then reason
	Usage      []usageRow   // the last usageDays UTC days, newest first
}

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
	Leader *bridge.LeaderInfo
}

// Lag is the WAL in bytes that the slot has not confirmed yet.
func (s slotStatus) Lag() uint64 {
	if s.CurrentLSN <= s.ConfirmedFlushLSN {
		return 0
	}
	return uint64(s.CurrentLSN - s.ConfirmedFlushLSN)
}

// checkpoint is the position up to which the target holds every change.
type checkpoint struct {
	LSN       replication.LSN
	UpdatedAt time.Time
}

// ruleStatus is a row of pgimageai.rules with the reason it cannot run, if any.
type ruleStatus struct {
	Name, Function, Model     string
	SourceTable, ImageColumn  string
	TargetTable, TargetColumn string
	Enabled                   bool
	Invalid                   string // detail of the open invalid_rule error; "" = none
}

// Rule states as status shows them.
const (
	ruleValid    = "valid"
	ruleInvalid  = "invalid"
	ruleDisabled = "disabled"
)

// State is valid, invalid or disabled (the bridge checks enabled rules only).
func (r ruleStatus) State() string {
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
func readGroups(ctx context.Context, source *database, group, slot string) ([]groupStatus, error) {
	rows, _ := source.conn.Query(ctx, `SELECT rule_group, count(*), count(*) FILTER (WHERE enabled) FROM pgimageai.rules GROUP BY 1 ORDER BY 1`)
	groups, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (groupStatus, error) {
		var g groupStatus
		err := row.Scan(&g.Group, &g.Rules, &g.Enabled)
		return g, err
	})
	if err != nil {
		return nil, source.explain("read rule groups", err)
	}
	for i := range groups {
		g := &groups[i]
		if g.Slot = groupName(g.Group); g.Group == group {
			g.Slot = slot
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
type laneStatus struct {
	Lane       string
	LSN        replication.LSN // commit LSN of the last source transaction applied (in part or whole)
	Ord        int64           // change ordinal inside it
	CommitTime *time.Time      // its source commit time
	UpdatedAt  time.Time
	// Delay is the target's now() minus CommitTime, when known.
	Delay *time.Duration
}

// Lag is the WAL in bytes that the lane may still have to apply: the
// current LSN minus the greater of its own position and the slot's
// confirmed one (below which every lane has applied everything). An idle
// lane beside a busy one shows the busy one's lag: it is an upper bound.
func (l laneStatus) Lag(s slotStatus) uint64 {
	at := max(l.LSN, s.ConfirmedFlushLSN)
	if !s.Found || s.CurrentLSN <= at {
		return 0
	}
	return uint64(s.CurrentLSN - at)
}

// backfill is a row of pgimageai.backfills.
type backfill struct {
	Rule      string
	State     string // running or done
	RowsDone  int64
	RowsTotal *int64 // an estimate taken at the start; nil when unknown
	UpdatedAt time.Time
}

// errorCount is the number of open errors of one rule with one reason.
type errorCount struct {
	Rule   string
	Reason functions.Reason
	Count  int64
}

// status prints the slot, checkpoint, rules, backfills and open errors.
func status(ctx context.Context, c config, stdout, _ io.Writer) error {
	source, target, closeAll, err := connectBoth(ctx, c)
	if err != nil {
		return err
	}
	defer closeAll()
	r, err := readStatus(ctx, source, target, c.Slot)
	if err != nil {
		return err
	}
	if r.Groups, err = readGroups(ctx, source, c.Group, c.Slot); err != nil {
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
	if r.OpenErrors, err = countOpenErrors(ctx, target); err != nil {
		return r, err
	}
	if r.Usage, err = readUsage(ctx, target); err != nil {
		return r, err
	}
	return r, nil
}

// slotExtras reads what replication.Slot leaves out. to_jsonb spares a query
// per server version: safe_wal_size exists from PostgreSQL 13 on.
const slotExtras = `SELECT coalesce(s.active_pid, 0), to_jsonb(s) ? 'safe_wal_size',
  (to_jsonb(s) ->> 'safe_wal_size')::bigint,
  coalesce(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END, '0/0')
FROM pg_replication_slots s WHERE s.slot_name = $1`

func readSlotStatus(ctx context.Context, source *database, name string) (slotStatus, error) {
	s := slotStatus{Slot: replication.Slot{Name: name}}
	leader, leads, err := bridge.Leader(ctx, source.conn, name)
	if err != nil {
		return s, source.explain("read the leader lock", err)
	}
	if leads {
		s.Leader = &leader
	}
	slot, found, err := replication.ReadSlot(ctx, source.conn, name)
	if err != nil {
		return s, fmt.Errorf("%s database %s: %w", source.role, source.where, err)
	}
	if !found {
		return s, nil
	}
	err = source.conn.QueryRow(ctx, slotExtras, name).Scan(&s.ActivePID, &s.HasSafeWALSize, &s.SafeWALSize, &s.CurrentLSN)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, nil // dropped between the two queries
	}
	if err != nil {
		return s, source.explain("read slot "+name, err)
	}
	s.Slot, s.Found = slot, true
	return s, nil
}

// readCheckpoint reads the checkpoint stored for slot; found is false when
// there is none.
func readCheckpoint(ctx context.Context, target *database, slot string) (cp checkpoint, found bool, err error) {
	err = target.conn.QueryRow(ctx, "SELECT lsn, updated_at FROM pgimageai.checkpoints WHERE slot = $1", slot).Scan(&cp.LSN, &cp.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return cp, false, nil
	}
	if err != nil {
		return cp, false, target.explain("read checkpoint", err)
	}
	return cp, true, nil
}

// readRules reads the rules from the source and the reasons of the invalid
// ones from the target's open invalid_rule errors.
func readRules(ctx context.Context, source, target *database) ([]ruleStatus, error) {
	rows, _ := source.conn.Query(ctx, `SELECT name, function, model, source_table, image_column, target_table, target_column, enabled
FROM pgimageai.rules ORDER BY name`)
	rules, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ruleStatus, error) {
		var r ruleStatus
		err := row.Scan(&r.Name, &r.Function, &r.Model, &r.SourceTable, &r.ImageColumn, &r.TargetTable, &r.TargetColumn, &r.Enabled)
		return r, err
	})
	if err != nil {
		return nil, source.explain("read rules", err)
	}
	rows, _ = target.conn.Query(ctx, `SELECT rule, detail FROM pgimageai.errors
WHERE reason = $1 AND resolved_at IS NULL`, functions.InvalidRule)
	invalid := map[string]string{}
	var rule, detail string
	_, err = pgx.ForEachRow(rows, []any{&rule, &detail}, func() error {
		invalid[rule] = detail
		return nil
	})
	if err != nil {
		return nil, target.explain("read invalid rules", err)
	}
	for i := range rules {
		rules[i].Invalid = invalid[rules[i].Name]
	}
	return rules, nil
}

func readLanes(ctx context.Context, target *database, slot string) ([]laneStatus, error) {
	rows, _ := target.conn.Query(ctx, `SELECT lane, lsn, ord, commit_time, updated_at, now() - commit_time
FROM pgimageai.lane_checkpoints WHERE slot = $1 ORDER BY lane`, slot)
	lanes, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (laneStatus, error) {
		var l laneStatus
		err := row.Scan(&l.Lane, &l.LSN, &l.Ord, &l.CommitTime, &l.UpdatedAt, &l.Delay)
		return l, err
	})
	if err != nil {
		return nil, target.explain("read lanes", err)
	}
	return lanes, nil
}

func readBackfills(ctx context.Context, target *database) ([]backfill, error) {
	rows, _ := target.conn.Query(ctx, "SELECT rule, state, rows_done, rows_total, updated_at FROM pgimageai.backfills ORDER BY rule")
	b, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (backfill, error) {
		var b backfill
		err := row.Scan(&b.Rule, &b.State, &b.RowsDone, &b.RowsTotal, &b.UpdatedAt)
		return b, err
	})
	if err != nil {
		return nil, target.explain("read backfills", err)
	}
	return b, nil
}

func countOpenErrors(ctx context.Context, target *database) ([]errorCount, error) {
	rows, _ := target.conn.Query(ctx, `SELECT rule, reason, count(*) FROM pgimageai.errors
WHERE resolved_at IS NULL GROUP BY rule, reason ORDER BY rule, reason`)
	counts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (errorCount, error) {
		var c errorCount
		err := row.Scan(&c.Rule, &c.Reason, &c.Count)
		return c, err
	})
	if err != nil {
		return nil, target.explain("count open errors", err)
	}
	return counts, nil
}
