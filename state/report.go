package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/value"
)

// What `pgimageai status`, `errors` and `retry` read and write: the reports
// of the bookkeeping the bridge keeps.

// Checkpoint is the slot's stored checkpoint.
type Checkpoint struct {
	LSN       value.LSN
	UpdatedAt time.Time
	// BoundsSlot: it was stored by a bridge that confirms the slot only up
	// to its stored checkpoint, so the slot is never ahead of it unless it
	// skipped changes (advanced by hand, or replaced by a standby's copy).
	BoundsSlot bool
}

// ReadCheckpoint returns the checkpoint stored for slot; found is false when
// there is none.
func ReadCheckpoint(ctx context.Context, conn *pgx.Conn, slot string) (cp Checkpoint, found bool, err error) {
	err = conn.QueryRow(ctx, "SELECT lsn, updated_at, bounds_slot FROM pgimageai.checkpoints WHERE slot = $1", slot).Scan(&cp.LSN, &cp.UpdatedAt, &cp.BoundsSlot)
	if errors.Is(err, pgx.ErrNoRows) {
		return cp, false, nil
	}
	if err != nil {
		return cp, false, fmt.Errorf("read checkpoint: %w", err)
	}
	return cp, true, nil
}

// RuleListing is a row of pgimageai.rules as status lists it.
type RuleListing struct {
	Name, Function, Model     string
	SourceTable, ImageColumn  string
	TargetTable, TargetColumn string
	Enabled                   bool
	Invalid                   string // detail of the open invalid_rule error; "" = none
	// Switch is rules.switch: how a change of the rule's version is
	// applied, versioned or in_place; "" (NULL) for the function's default.
	Switch string
}

// AllRules reads every rule, of every group, in name order.
func AllRules(ctx context.Context, conn *pgx.Conn) ([]RuleListing, error) {
	rows, _ := conn.Query(ctx, `SELECT name, function, model, source_table, image_column, target_table, target_column, enabled, coalesce(switch, '')
FROM pgimageai.rules ORDER BY name`)
	rules, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (RuleListing, error) {
		var r RuleListing
		err := row.Scan(&r.Name, &r.Function, &r.Model, &r.SourceTable, &r.ImageColumn, &r.TargetTable, &r.TargetColumn, &r.Enabled, &r.Switch)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("read rules: %w", err)
	}
	return rules, nil
}

// InvalidDetails returns the detail of every open invalid_rule error, by rule.
func InvalidDetails(ctx context.Context, conn *pgx.Conn) (map[string]string, error) {
	rows, _ := conn.Query(ctx, `SELECT rule, detail FROM pgimageai.errors WHERE reason = $1 AND resolved_at IS NULL`, value.InvalidRule)
	invalid := map[string]string{}
	var rule, detail string
	_, err := pgx.ForEachRow(rows, []any{&rule, &detail}, func() error {
		invalid[rule] = detail
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read invalid rules: %w", err)
	}
	return invalid, nil
}

// GroupCount is a rule group and how many rules it has.
type GroupCount struct {
	Group          string
	Rules, Enabled int64
}

// RuleGroups returns every rule group, in name order.
func RuleGroups(ctx context.Context, conn *pgx.Conn) ([]GroupCount, error) {
	rows, _ := conn.Query(ctx, `SELECT rule_group, count(*), count(*) FILTER (WHERE enabled) FROM pgimageai.rules GROUP BY 1 ORDER BY 1`)
	groups, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (GroupCount, error) {
		var g GroupCount
		err := row.Scan(&g.Group, &g.Rules, &g.Enabled)
		return g, err
	})
	if err != nil {
		return nil, fmt.Errorf("read rule groups: %w", err)
	}
	return groups, nil
}

// LaneRow is a row of pgimageai.lane_checkpoints: how far the rules that
// write one target table have applied the stream.
type LaneRow struct {
	Lane       string
	LSN        value.LSN  // commit LSN of the last source transaction applied (in part or whole)
	Ord        int64      // change ordinal inside it
	CommitTime *time.Time // its source commit time
	UpdatedAt  time.Time
	// Delay is the target's now() minus CommitTime, when known.
	Delay *time.Duration
	// Pending is what the lane holds as the slot's leader stored it within
	// the last 30 seconds (pgimageai.lane_pending); nil when not known (no
	// leader running). OldestPending is the age of the oldest change it
	// holds (target's now() minus its source commit time); nil when none.
	Pending       *int64
	OldestPending *time.Duration
}

// Lanes reads the lane positions of slot, in lane order.
func Lanes(ctx context.Context, conn *pgx.Conn, slot string) ([]LaneRow, error) {
	// A lane with changes waiting but nothing written yet has no checkpoint
	// row: the full join lists it too.
	rows, _ := conn.Query(ctx, `SELECT coalesce(c.lane, p.lane), coalesce(c.lsn, '0/0'), coalesce(c.ord, 0), c.commit_time,
  coalesce(c.updated_at, p.updated_at), now() - c.commit_time,
  CASE WHEN p.updated_at > now() - interval '30 seconds' THEN p.pending END,
  CASE WHEN p.updated_at > now() - interval '30 seconds' AND p.pending > 0 THEN now() - p.oldest_commit_time END
FROM (SELECT * FROM pgimageai.lane_checkpoints WHERE slot = $1) c
FULL JOIN (SELECT * FROM pgimageai.lane_pending WHERE slot = $1) p ON p.lane = c.lane
ORDER BY 1`, slot)
	lanes, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (LaneRow, error) {
		var l LaneRow
		err := row.Scan(&l.Lane, &l.LSN, &l.Ord, &l.CommitTime, &l.UpdatedAt, &l.Delay, &l.Pending, &l.OldestPending)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("read lanes: %w", err)
	}
	return lanes, nil
}

// BackfillRow is a row of pgimageai.backfills as status lists it.
type BackfillRow struct {
	Rule      string
	State     string // running or done
	RowsDone  int64
	RowsTotal *int64 // an estimate taken at the start; nil when unknown
	UpdatedAt time.Time
}

// Backfills reads every backfill row, in rule order.
func Backfills(ctx context.Context, conn *pgx.Conn) ([]BackfillRow, error) {
	rows, _ := conn.Query(ctx, "SELECT rule, state, rows_done, rows_total, updated_at FROM pgimageai.backfills ORDER BY rule")
	b, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (BackfillRow, error) {
		var b BackfillRow
		err := row.Scan(&b.Rule, &b.State, &b.RowsDone, &b.RowsTotal, &b.UpdatedAt)
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("read backfills: %w", err)
	}
	return b, nil
}

// ErrorCount is the number of open errors of one rule with one reason.
type ErrorCount struct {
	Rule   string
	Reason value.Reason
	Count  int64
}

// CountOpenErrors counts the open errors by rule and reason.
func CountOpenErrors(ctx context.Context, conn *pgx.Conn) ([]ErrorCount, error) {
	rows, _ := conn.Query(ctx, `SELECT rule, reason, count(*) FROM pgimageai.errors
WHERE resolved_at IS NULL GROUP BY rule, reason ORDER BY rule, reason`)
	counts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ErrorCount, error) {
		var c ErrorCount
		err := row.Scan(&c.Rule, &c.Reason, &c.Count)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("count open errors: %w", err)
	}
	return counts, nil
}

// OpenError is an open row of pgimageai.errors.
type OpenError struct {
	ID          int64
	Rule        string
	SourceTable string
	SourceKey   json.RawMessage // e.g. {"id": 42}; {} for invalid_rule
	Reason      value.Reason
	Detail      string
	ImageBytes  *int32     // nil where there was no image
	LSN         *value.LSN // nil where there was no change (invalid_rule)
	Attempts    int32
	CreatedAt   time.Time
}

// OpenErrors reads the open errors of rule with reason ("" matches all),
// newest first, at most limit of them (0 = all), and how many match in all.
func OpenErrors(ctx context.Context, conn *pgx.Conn, rule string, reason value.Reason, limit int) (errs []OpenError, matching int64, err error) {
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	// count(*) OVER () is taken before LIMIT: it counts every match.
	rows, _ := conn.Query(ctx, `SELECT id, rule, source_table, source_key::text, reason, detail,
  image_bytes, lsn, attempts, created_at, count(*) OVER ()
FROM pgimageai.errors
WHERE resolved_at IS NULL AND ($1::text = '' OR rule = $1) AND ($2::text = '' OR reason = $2)
ORDER BY created_at DESC, id DESC
LIMIT $3`, rule, string(reason), lim)
	errs, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (OpenError, error) {
		var e OpenError
		var key string
		err := row.Scan(&e.ID, &e.Rule, &e.SourceTable, &key, &e.Reason, &e.Detail,
			&e.ImageBytes, &e.LSN, &e.Attempts, &e.CreatedAt, &matching)
		e.SourceKey = json.RawMessage(key)
		return e, err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list open errors: %w", err)
	}
	return errs, matching, nil
}

// CountRetryable counts the open errors, invalid_rule ones aside, of rule
// with reason ("" matches all).
func CountRetryable(ctx context.Context, conn *pgx.Conn, rule string, reason value.Reason) (int64, error) {
	var n int64
	err := conn.QueryRow(ctx, `SELECT count(*) FROM pgimageai.errors
WHERE resolved_at IS NULL AND reason <> $1 AND ($2::text = '' OR rule = $2) AND ($3::text = '' OR reason = $3)`,
		string(value.InvalidRule), rule, string(reason)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count open errors: %w", err)
	}
	return n, nil
}

// RequestRetry inserts a retry request of rule and reason ("" = all) into
// pgimageai.retry_requests and returns the WAL position right after its
// commit: the bridge sees it there, in commit order with the changes around
// it.
func RequestRetry(ctx context.Context, conn *pgx.Conn, rule string, reason value.Reason) (value.LSN, error) {
	nullable := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	if _, err := conn.Exec(ctx, "INSERT INTO pgimageai.retry_requests (rule, reason) VALUES ($1, $2)", nullable(rule), nullable(string(reason))); err != nil {
		return 0, fmt.Errorf("insert retry request: %w", err)
	}
	var lsn value.LSN
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()").Scan(&lsn); err != nil {
		return 0, fmt.Errorf("read WAL position: %w", err)
	}
	return lsn, nil
}

// UsageRow is one rule's and model's provider usage of one UTC day.
type UsageRow struct {
	Rule, Model      string
	Day              time.Time
	Calls            int64
	PromptTokens     int64
	CompletionTokens int64
}

// RecentUsage reads the usage of the last days UTC days, newest first.
func RecentUsage(ctx context.Context, conn *pgx.Conn, days int) ([]UsageRow, error) {
	rows, _ := conn.Query(ctx, `SELECT rule, model, day, calls, prompt_tokens, completion_tokens FROM pgimageai.usage
WHERE day > (now() AT TIME ZONE 'UTC')::date - $1::int ORDER BY day DESC, rule, model`, days)
	u, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (UsageRow, error) {
		var u UsageRow
		err := row.Scan(&u.Rule, &u.Model, &u.Day, &u.Calls, &u.PromptTokens, &u.CompletionTokens)
		return u, err
	})
	if err != nil {
		return nil, fmt.Errorf("read usage: %w", err)
	}
	return u, nil
}

// Spent is what one model spent on one UTC day.
type Spent struct {
	Calls, Tokens int64
}

// SpentToday returns, by model, the calls and tokens pgimageai.usage counts
// for the current UTC day (the database's clock), and that day.
func SpentToday(ctx context.Context, conn *pgx.Conn) (map[string]Spent, time.Time, error) {
	var day time.Time
	if err := conn.QueryRow(ctx, "SELECT (now() AT TIME ZONE 'UTC')::date").Scan(&day); err != nil {
		return nil, day, fmt.Errorf("read the UTC day: %w", err)
	}
	rows, _ := conn.Query(ctx, `SELECT model, sum(calls)::bigint, sum(prompt_tokens + completion_tokens)::bigint FROM pgimageai.usage
WHERE day = $1 GROUP BY model`, day)
	out := map[string]Spent{}
	var model string
	var s Spent
	_, err := pgx.ForEachRow(rows, []any{&model, &s.Calls, &s.Tokens}, func() error {
		out[model] = s
		return nil
	})
	if err != nil {
		return nil, day, fmt.Errorf("read today's usage: %w", err)
	}
	return out, day, nil
}

// CountedToday returns, by model, what the daily budget counts for the
// current UTC day: the calls and tokens of pgimageai.usage
// (SpentToday), plus the requests waiting in that day's batches
// (PendingBatchRequests) — the count a restarted bridge starts from, and
// what status shows.
func CountedToday(ctx context.Context, conn *pgx.Conn) (map[string]Spent, time.Time, error) {
	spent, day, err := SpentToday(ctx, conn)
	if err != nil {
		return nil, day, err
	}
	pending, err := PendingBatchRequests(ctx, conn, day)
	if err != nil {
		return nil, day, err
	}
	for model, n := range pending {
		s := spent[model]
		s.Calls += n
		spent[model] = s
	}
	return spent, day, nil
}

// ModelUsage is what pgimageai.usage says of a model's answered calls: how
// many, and their tokens.
type ModelUsage struct {
	Calls, PromptTokens, CompletionTokens int64
}

// UsageOfModel sums pgimageai.usage for model, over every day and rule.
func UsageOfModel(ctx context.Context, conn *pgx.Conn, model string) (ModelUsage, error) {
	var u ModelUsage
	err := conn.QueryRow(ctx, `SELECT coalesce(sum(calls), 0)::bigint, coalesce(sum(prompt_tokens), 0)::bigint, coalesce(sum(completion_tokens), 0)::bigint
FROM pgimageai.usage WHERE model = $1`, model).Scan(&u.Calls, &u.PromptTokens, &u.CompletionTokens)
	if err != nil {
		return u, fmt.Errorf("read usage of %s: %w", model, err)
	}
	return u, nil
}

// RulePrompt reads the prompt of rule name (nil for SQL NULL); found is false
// when there is no such rule.
func RulePrompt(ctx context.Context, conn *pgx.Conn, name string) (prompt *string, found bool, err error) {
	err = conn.QueryRow(ctx, "SELECT prompt FROM pgimageai.rules WHERE name = $1", name).Scan(&prompt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read the prompt of rule %s: %w", name, err)
	}
	return prompt, true, nil
}
