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

// VersionRow is a row of pgimageai.versions: what changes a rule's results,
// and the whole models row as last run with it.
type VersionRow struct {
	ID       string
	Function string
	Model    string
	Provider string
	BaseURL  string
	ModelID  string
	Options  json.RawMessage
	Prompt   *string
	ModelRow json.RawMessage
}

// SwitchRow is a row of pgimageai.switches: a rule's switch from its live
// version to a new one, computed on the side.
type SwitchRow struct {
	Rule, From, To, Side      string
	TargetTable, Live, Shadow string
	State                     value.SwitchState
	Detail                    string
	Request                   value.SwitchRequest
	StartedAt                 time.Time
}

// Versions is what the bridge knows of the rules' versions: the version
// each live column holds, the running switches and the recorded versions.
type Versions struct {
	Live     map[string]string     // rule → version
	Switches map[string]SwitchRow  // by rule
	Rows     map[string]VersionRow // by version id; only those of Live and Switches
}

// LoadVersions reads pgimageai.rule_versions, pgimageai.switches and the
// versions they name.
func LoadVersions(ctx context.Context, conn *pgx.Conn) (Versions, error) {
	v := Versions{Live: map[string]string{}, Switches: map[string]SwitchRow{}, Rows: map[string]VersionRow{}}
	rows, _ := conn.Query(ctx, "SELECT rule, version FROM pgimageai.rule_versions")
	var rule, version string
	if _, err := pgx.ForEachRow(rows, []any{&rule, &version}, func() error { v.Live[rule] = version; return nil }); err != nil {
		return v, fmt.Errorf("read rule versions: %w", err)
	}
	rows, _ = conn.Query(ctx, `SELECT rule, from_version, to_version, side_rule, target_table, live_column, shadow_column, state,
  coalesce(detail, ''), coalesce(request, ''), started_at FROM pgimageai.switches`)
	var s SwitchRow
	if _, err := pgx.ForEachRow(rows, []any{&s.Rule, &s.From, &s.To, &s.Side, &s.TargetTable, &s.Live, &s.Shadow, &s.State, &s.Detail, &s.Request, &s.StartedAt},
		func() error { v.Switches[s.Rule] = s; return nil }); err != nil {
		return v, fmt.Errorf("read switches: %w", err)
	}
	rows, _ = conn.Query(ctx, `SELECT id, function, model, provider, coalesce(base_url, ''), model_id, options, prompt, model_row
FROM pgimageai.versions WHERE id IN (SELECT version FROM pgimageai.rule_versions UNION SELECT to_version FROM pgimageai.switches)`)
	var r VersionRow
	if _, err := pgx.ForEachRow(rows, []any{&r.ID, &r.Function, &r.Model, &r.Provider, &r.BaseURL, &r.ModelID, &r.Options, &r.Prompt, &r.ModelRow},
		func() error { v.Rows[r.ID] = r; return nil }); err != nil {
		return v, fmt.Errorf("read versions: %w", err)
	}
	return v, nil
}

// RecordVersion stores version row r (the models row as run now), and,
// when live, makes it the version of rule's live column.
func RecordVersion(ctx context.Context, conn *pgx.Conn, r VersionRow, rule string, live bool) error {
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO pgimageai.versions (id, function, model, provider, base_url, model_id, options, prompt, model_row)
VALUES ($1, $2, $3, $4, nullif($5, ''), $6, $7, $8, $9)
ON CONFLICT (id) DO UPDATE SET model = EXCLUDED.model, model_row = EXCLUDED.model_row, last_used_at = now()
WHERE versions.model_row IS DISTINCT FROM EXCLUDED.model_row OR versions.last_used_at < now() - interval '1 hour'`,
		r.ID, r.Function, r.Model, r.Provider, r.BaseURL, r.ModelID, string(r.Options), r.Prompt, string(r.ModelRow))
	if live {
		b.Queue(`INSERT INTO pgimageai.rule_versions (rule, version) VALUES ($1, $2)
ON CONFLICT (rule) DO UPDATE SET version = EXCLUDED.version, since = now() WHERE rule_versions.version <> EXCLUDED.version`, rule, r.ID)
	}
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("record version %s of %s: %w", r.ID, rule, err)
	}
	return nil
}

// ForgetRuleVersion forgets the live version of rule, which was deleted.
func ForgetRuleVersion(ctx context.Context, conn *pgx.Conn, rule string) error {
	if _, err := conn.Exec(ctx, "DELETE FROM pgimageai.rule_versions WHERE rule = $1", rule); err != nil {
		return fmt.Errorf("forget the version of %s: %w", rule, err)
	}
	return nil
}

// StartSwitch records the switch s (replacing a switch of the same rule to
// another version, which the caller cancels).
func StartSwitch(ctx context.Context, conn *pgx.Conn, s SwitchRow) error {
	_, err := conn.Exec(ctx, `INSERT INTO pgimageai.switches (rule, from_version, to_version, side_rule, target_table, live_column, shadow_column)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (rule) DO UPDATE SET from_version = EXCLUDED.from_version, to_version = EXCLUDED.to_version, side_rule = EXCLUDED.side_rule,
  target_table = EXCLUDED.target_table, live_column = EXCLUDED.live_column, shadow_column = EXCLUDED.shadow_column,
  state = 'computing', detail = NULL, request = NULL, started_at = now(), updated_at = now()`,
		s.Rule, s.From, s.To, s.Side, s.TargetTable, s.Live, s.Shadow)
	if err != nil {
		return fmt.Errorf("record the switch of %s: %w", s.Rule, err)
	}
	return nil
}

// SetSwitchState records where the switch of rule to version to stands
// (computing, indexing, ready or held, with detail for held).
func SetSwitchState(ctx context.Context, conn *pgx.Conn, rule, to string, st value.SwitchState, detail string) error {
	_, err := conn.Exec(ctx, `UPDATE pgimageai.switches SET state = $3, detail = nullif($4, ''), updated_at = now()
WHERE rule = $1 AND to_version = $2 AND state <> $5 AND (state, coalesce(detail, '')) IS DISTINCT FROM ($3, $4)`, rule, to, st, detail, value.SwitchAborted)
	if err != nil {
		return fmt.Errorf("record the switch state of %s: %w", rule, err)
	}
	return nil
}

// SwitchStatus is what a switch waits for, read by its watcher.
type SwitchStatus struct {
	Request  value.SwitchRequest // the operator's: force, abort or ""
	Computed bool                // the side rule's backfill is done for its fingerprint
	Failed   int64               // open errors of the side rule that hold the switch
	Aborted  bool
	Gone     bool // the switch row is gone or names another version
}

// HoldingReasons are the reasons of the side rule's errors rows that hold
// a switch: the new version failed the row (provider_error, bad_response),
// its daily budget refused it (budget_exhausted: retried on the next UTC
// day), or the target refused it (target_refused). An image's own fault
// (empty_image, unknown_format, too_large, unsupported_format) holds
// nothing: the live column holds NULL for it too.
var HoldingReasons = reasonTexts(value.HoldingReasons)

func reasonTexts(rs []value.Reason) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}

// LoadSwitchStatus reads what the switch of rule to version to waits for;
// fingerprint is the side rule's.
func LoadSwitchStatus(ctx context.Context, conn *pgx.Conn, rule, to, side, fingerprint string) (SwitchStatus, error) {
	var s SwitchStatus
	var st value.SwitchState
	err := conn.QueryRow(ctx, `SELECT coalesce(s.request, ''), s.state,
  EXISTS (SELECT FROM pgimageai.backfills b WHERE b.rule = $3 AND b.fingerprint = $4 AND b.state = 'done'),
  (SELECT count(*) FROM pgimageai.errors e WHERE e.rule = $3 AND e.resolved_at IS NULL AND e.reason = ANY($5))
FROM pgimageai.switches s WHERE s.rule = $1 AND s.to_version = $2`, rule, to, side, fingerprint, HoldingReasons).
		Scan(&s.Request, &st, &s.Computed, &s.Failed)
	if errors.Is(err, pgx.ErrNoRows) {
		s.Gone = true
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("read the switch of %s: %w", rule, err)
	}
	s.Aborted = st == value.SwitchAborted
	return s, nil
}

// AbortSwitch marks the switch of rule to version to aborted (an
// operator's request, taken by the bridge): it is not started again until
// the rule's version changes again.
func AbortSwitch(ctx context.Context, conn *pgx.Conn, rule, to string) error {
	_, err := conn.Exec(ctx, `UPDATE pgimageai.switches SET state = 'aborted', request = NULL, detail = 'aborted by an operator; the live column keeps the old version', updated_at = now()
WHERE rule = $1 AND to_version = $2`, rule, to)
	if err != nil {
		return fmt.Errorf("abort the switch of %s: %w", rule, err)
	}
	return nil
}

// SwitchDone is the bookkeeping of a switch, in the switch transaction
// before sink.Switch (so that the target table's lock, taken last, is held
// only for the catalog change and SwitchEnded): the side rule's results,
// errors and backfill become the rule's, and its live version the new one.
type SwitchDone struct {
	Rule, Side  string
	To          string
	Fingerprint string // the rule's once switched
}

func (o SwitchDone) Queue(b *pgx.Batch) {
	b.Queue(`DELETE FROM pgimageai.results WHERE rule = $1`, o.Rule)
	b.Queue(`UPDATE pgimageai.results SET rule = $1 WHERE rule = $2`, o.Rule, o.Side)
	b.Queue(`UPDATE pgimageai.errors SET resolved_at = now() WHERE rule = $1 AND resolved_at IS NULL`, o.Rule)
	b.Queue(`UPDATE pgimageai.errors SET rule = $1 WHERE rule = $2`, o.Rule, o.Side)
	b.Queue(`DELETE FROM pgimageai.backfills WHERE rule = $1`, o.Side)
	b.Queue(`DELETE FROM pgimageai.backfill_batches WHERE rule = $1`, o.Side)
	b.Queue(`INSERT INTO pgimageai.backfills AS b (rule, state, fingerprint, finished_at) VALUES ($1, 'done', $2, now())
ON CONFLICT (rule) DO UPDATE SET state = 'done', fingerprint = EXCLUDED.fingerprint, last_key = NULL, stop_key = NULL, updated_at = now(), finished_at = now()`,
		o.Rule, o.Fingerprint)
	b.Queue(`INSERT INTO pgimageai.rule_versions (rule, version) VALUES ($1, $2)
ON CONFLICT (rule) DO UPDATE SET version = EXCLUDED.version, since = now()`, o.Rule, o.To)
	// Counted here, before the lock: SwitchEnded records it.
	b.Queue(`SELECT set_config('pgimageai.switch_rows', (SELECT count(*) FROM pgimageai.results WHERE rule = $1)::text, true)`, o.Rule)
}

// SwitchEnded records a switch that ended in the switch transaction,
// after sink.Switch, and ends its pgimageai.switches row.
type SwitchEnded struct {
	Rule          string
	From, To      string
	Forced        bool
	StartedAt     time.Time
	LockMillisSQL string // an SQL expression of the lock time so far, or "" (NULL)
}

func (o SwitchEnded) Queue(b *pgx.Batch) {
	outcome := value.SwitchSwitched
	if o.Forced {
		outcome = value.SwitchForced
	}
	lock := "NULL::double precision"
	if o.LockMillisSQL != "" {
		lock = o.LockMillisSQL
	}
	b.Queue(`DELETE FROM pgimageai.switches WHERE rule = $1 AND to_version = $2`, o.Rule, o.To)
	b.Queue(`INSERT INTO pgimageai.switch_history (rule, from_version, to_version, outcome, rows_switched, lock_ms, started_at, ended_at)
SELECT $1, $2, $3, $4, nullif(current_setting('pgimageai.switch_rows', true), '')::bigint, `+lock+`, $5, clock_timestamp()`, o.Rule, o.From, o.To, outcome, o.StartedAt)
}

// SideGone is the bookkeeping of a switch given up (in the transaction
// that drops its shadow column): the side rule's results, open errors and
// backfill are forgotten, the history says why; an aborted switch's row
// stays (state aborted), a cancelled one's goes unless it names another
// version already.
type SideGone struct {
	Rule, Side, From, To string
	Aborted              bool
	StartedAt            time.Time
}

func (o SideGone) Queue(b *pgx.Batch) {
	outcome := value.SwitchCancelled
	if o.Aborted {
		outcome = value.SwitchGaveUp
	}
	b.Queue(`DELETE FROM pgimageai.results WHERE rule = $1`, o.Side)
	b.Queue(`UPDATE pgimageai.errors SET resolved_at = now() WHERE rule = $1 AND resolved_at IS NULL`, o.Side)
	b.Queue(`DELETE FROM pgimageai.backfills WHERE rule = $1`, o.Side)
	b.Queue(`INSERT INTO pgimageai.switch_history (rule, from_version, to_version, outcome, started_at) VALUES ($1, $2, $3, $4, $5)`,
		o.Rule, o.From, o.To, outcome, o.StartedAt)
	if !o.Aborted {
		b.Queue(`DELETE FROM pgimageai.switches WHERE rule = $1 AND to_version = $2`, o.Rule, o.To)
	}
}
