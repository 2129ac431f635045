package state

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/value"
)

// What `pgimageai status`, `switch` and `estimate` read of rules' versions
// and of their switches (pgimageai.versions, rule_versions, switches,
// switch_history, and the side rules' results, backfills, usage and errors).

// ResultVersion is how many stored results of one rule one version made.
type ResultVersion struct {
	Rule string
	// Version is the version's id; "" for the results stored before
	// versions were recorded (results.version NULL).
	Version string
	// ModelID is the version's provider model id (pgimageai.versions.model);
	// "" when the version is not recorded.
	ModelID string
	Results int64
	// Live: the version the rule's live column holds (pgimageai.rule_versions).
	Live bool
}

// ResultVersions counts the stored results of every rule by version, with
// each rule's live version even when it has no result yet, in rule order,
// the live version first and the unrecorded results last. The side rules of
// running switches are left out: RunningSwitches counts theirs.
func ResultVersions(ctx context.Context, conn *pgx.Conn) ([]ResultVersion, error) {
	rows, _ := conn.Query(ctx, `WITH counts AS (
  SELECT rule, version, count(*) AS n FROM pgimageai.results GROUP BY rule, version)
SELECT coalesce(c.rule, l.rule), coalesce(c.version, l.version, ''), coalesce(v.model_id, ''), coalesce(c.n, 0), l.rule IS NOT NULL
FROM counts c
FULL JOIN pgimageai.rule_versions l ON l.rule = c.rule AND l.version = c.version
LEFT JOIN pgimageai.versions v ON v.id = coalesce(c.version, l.version)
WHERE coalesce(c.rule, l.rule) NOT IN (SELECT side_rule FROM pgimageai.switches)
ORDER BY 1, 5 DESC, coalesce(c.version, l.version) IS NULL, 2`)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ResultVersion, error) {
		var v ResultVersion
		err := row.Scan(&v.Rule, &v.Version, &v.ModelID, &v.Results, &v.Live)
		return v, err
	})
	if err != nil {
		return nil, fmt.Errorf("count results by version: %w", err)
	}
	return out, nil
}

// SwitchPlan is what a switch switches: the rule, the side rule that
// computes the new version, the two versions with their provider model
// ids ("" when a version is not recorded), and the target table's live and
// shadow columns.
type SwitchPlan struct {
	Rule, Side                string
	From, To                  string
	FromModelID, ToModelID    string
	TargetTable, Live, Shadow string
}

// SwitchProgress is a row of pgimageai.switches with what its side rule has
// done and spent.
type SwitchProgress struct {
	SwitchPlan
	State   string // computing, indexing, ready, held or aborted
	Detail  string // why held or aborted; "" when none
	Request string // the operator's request: force (until the switch), abort (until the bridge takes it) or ""
	// StartedAt is when the switch started; Elapsed is the target's now()
	// minus it.
	StartedAt time.Time
	Elapsed   time.Duration
	// RowsDone and RowsTotal are the side rule's backfill's
	// (pgimageai.backfills); RowsTotal is an estimate taken at its start,
	// nil when unknown.
	RowsDone  int64
	RowsTotal *int64
	Results   int64 // the side rule's stored results
	// Usage is the side rule's pgimageai.usage since the UTC day of
	// StartedAt, by model (models.name).
	Usage map[string]ModelUsage
	// Holding counts the side rule's open errors that hold the switch
	// (HoldingReasons), by reason.
	Holding map[value.Reason]int64
}

// RunningSwitches reads the rows of pgimageai.switches (of rule only, unless
// rule is ""), in rule order, with their side rules' progress, usage and
// failures.
func RunningSwitches(ctx context.Context, conn *pgx.Conn, rule string) ([]SwitchProgress, error) {
	rows, _ := conn.Query(ctx, `SELECT s.rule, s.side_rule, s.from_version, s.to_version, coalesce(fv.model_id, ''), coalesce(tv.model_id, ''),
  s.target_table, s.live_column, s.shadow_column, s.state, coalesce(s.detail, ''), coalesce(s.request, ''),
  s.started_at, now() - s.started_at, coalesce(b.rows_done, 0), b.rows_total,
  (SELECT count(*) FROM pgimageai.results r WHERE r.rule = s.side_rule)
FROM pgimageai.switches s
LEFT JOIN pgimageai.versions fv ON fv.id = s.from_version
LEFT JOIN pgimageai.versions tv ON tv.id = s.to_version
LEFT JOIN pgimageai.backfills b ON b.rule = s.side_rule
WHERE $1::text = '' OR s.rule = $1
ORDER BY s.rule`, rule)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (SwitchProgress, error) {
		s := SwitchProgress{Usage: map[string]ModelUsage{}, Holding: map[value.Reason]int64{}}
		err := row.Scan(&s.Rule, &s.Side, &s.From, &s.To, &s.FromModelID, &s.ToModelID,
			&s.TargetTable, &s.Live, &s.Shadow, &s.State, &s.Detail, &s.Request,
			&s.StartedAt, &s.Elapsed, &s.RowsDone, &s.RowsTotal, &s.Results)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("read switches: %w", err)
	}
	if len(out) == 0 {
		return out, nil
	}
	at := map[string]*SwitchProgress{}
	for i := range out {
		at[out[i].Rule] = &out[i]
	}
	rows, _ = conn.Query(ctx, `SELECT s.rule, u.model, sum(u.calls)::bigint, sum(u.prompt_tokens)::bigint, sum(u.completion_tokens)::bigint
FROM pgimageai.switches s
JOIN pgimageai.usage u ON u.rule = s.side_rule AND u.day >= (s.started_at AT TIME ZONE 'UTC')::date
WHERE $1::text = '' OR s.rule = $1
GROUP BY 1, 2`, rule)
	var r, model string
	var u ModelUsage
	if _, err := pgx.ForEachRow(rows, []any{&r, &model, &u.Calls, &u.PromptTokens, &u.CompletionTokens}, func() error {
		if s := at[r]; s != nil {
			s.Usage[model] = u
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read the usage of switches: %w", err)
	}
	rows, _ = conn.Query(ctx, `SELECT s.rule, e.reason, count(*)
FROM pgimageai.switches s
JOIN pgimageai.errors e ON e.rule = s.side_rule AND e.resolved_at IS NULL AND e.reason = ANY($2)
WHERE $1::text = '' OR s.rule = $1
GROUP BY 1, 2`, rule, HoldingReasons)
	var reason value.Reason
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&r, &reason, &n}, func() error {
		if s := at[r]; s != nil {
			s.Holding[reason] = n
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read the failures of switches: %w", err)
	}
	return out, nil
}

// SwitchEnd is a row of pgimageai.switch_history: a switch that ended.
type SwitchEnd struct {
	Rule                   string
	From, To               string
	FromModelID, ToModelID string // "" when the version is not recorded
	Outcome                string // switched, forced, aborted or cancelled
	// RowsSwitched is the new version's results when it switched;
	// LockMillis how long the switch transaction held its lock. nil
	// unless switched or forced (or not measured).
	RowsSwitched *int64
	LockMillis   *float64
	StartedAt    time.Time
	EndedAt      time.Time
}

// SwitchHistory reads the last limit switches that ended (of rule only,
// unless rule is ""), newest first.
func SwitchHistory(ctx context.Context, conn *pgx.Conn, rule string, limit int) ([]SwitchEnd, error) {
	rows, _ := conn.Query(ctx, `SELECT h.rule, h.from_version, h.to_version, coalesce(fv.model_id, ''), coalesce(tv.model_id, ''),
  h.outcome, h.rows_switched, h.lock_ms, h.started_at, h.ended_at
FROM pgimageai.switch_history h
LEFT JOIN pgimageai.versions fv ON fv.id = h.from_version
LEFT JOIN pgimageai.versions tv ON tv.id = h.to_version
WHERE $1::text = '' OR h.rule = $1
ORDER BY h.ended_at DESC, h.id DESC
LIMIT $2`, rule, limit)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (SwitchEnd, error) {
		var h SwitchEnd
		err := row.Scan(&h.Rule, &h.From, &h.To, &h.FromModelID, &h.ToModelID, &h.Outcome, &h.RowsSwitched, &h.LockMillis, &h.StartedAt, &h.EndedAt)
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the switch history: %w", err)
	}
	return out, nil
}

// LiveVersion is the version a rule's live column holds and the switch
// recorded for the rule, if any.
type LiveVersion struct {
	// Version and ModelID are "" when no version is recorded for the rule
	// (it has not run since versions were recorded).
	Version, ModelID string
	// SwitchTo is the version the rule's switch computes, SwitchState its
	// state (aborted included); "" when there is none.
	SwitchTo, SwitchState string
}

// RuleLiveVersion reads the live version of rule and its switch.
func RuleLiveVersion(ctx context.Context, conn *pgx.Conn, rule string) (LiveVersion, error) {
	var l LiveVersion
	err := conn.QueryRow(ctx, `SELECT
  coalesce((SELECT version FROM pgimageai.rule_versions WHERE rule = $1), ''),
  coalesce((SELECT v.model_id FROM pgimageai.rule_versions l JOIN pgimageai.versions v ON v.id = l.version WHERE l.rule = $1), ''),
  coalesce((SELECT to_version FROM pgimageai.switches WHERE rule = $1), ''),
  coalesce((SELECT state FROM pgimageai.switches WHERE rule = $1), '')`, rule).
		Scan(&l.Version, &l.ModelID, &l.SwitchTo, &l.SwitchState)
	if err != nil {
		return l, fmt.Errorf("read the live version of rule %s: %w", rule, err)
	}
	return l, nil
}
