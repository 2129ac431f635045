package state

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/value"
)

// Park parks a row of Rule whose call was not made, or not finished,
// because its model is down (pgimageai.parked): written by the lane in
// the transaction that moves its checkpoint past the row, so the slot goes
// on. A newer change of a row parked already takes its place at the end
// (a new seq); a replay of it (Replay: the row sent again after the model
// came back, or as its probe) keeps its place and counts an attempt.
type Park struct {
	Rule        string
	SourceTable string
	Key         []byte // source_key JSON
	Model       string // models.name
	LSN         value.LSN
	Cause       string
	Replay      bool
}

func (o Park) Queue(b *pgx.Batch) {
	if o.Replay {
		b.Queue(`INSERT INTO pgimageai.parked AS p (rule, source_key, source_table, model, lsn, cause)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (rule, source_key) DO UPDATE SET cause = excluded.cause, attempts = p.attempts + 1, updated_at = now()`,
			o.Rule, string(o.Key), o.SourceTable, o.Model, o.LSN, o.Cause)
		return
	}
	b.Queue(`INSERT INTO pgimageai.parked AS p (rule, source_key, source_table, model, lsn, cause)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (rule, source_key) DO UPDATE SET seq = nextval('pgimageai.parked_seq_seq'), model = excluded.model,
  lsn = excluded.lsn, cause = excluded.cause, attempts = p.attempts + 1, updated_at = now()`,
		o.Rule, string(o.Key), o.SourceTable, o.Model, o.LSN, o.Cause)
}

// Unpark deletes the parked row of Rule for the rows keyed Keys (source_key
// JSON): a result, a NULL or an errors row was written for them, newer than
// what parked.
type Unpark struct {
	Rule string
	Keys []string
}

func (o Unpark) Queue(b *pgx.Batch) {
	if len(o.Keys) == 1 {
		b.Queue(`DELETE FROM pgimageai.parked WHERE rule = $1 AND source_key = $2::jsonb`, o.Rule, o.Keys[0])
		return
	}
	b.Queue(`DELETE FROM pgimageai.parked WHERE rule = $1 AND source_key = ANY($2::jsonb[])`, o.Rule, o.Keys)
}

// UnparkRows deletes the parked rows of Rules for the source row keyed Key
// (deleted), or for every row (Key nil: the table was truncated).
type UnparkRows struct {
	Rules []string
	Key   []byte
}

func (o UnparkRows) Queue(b *pgx.Batch) {
	if o.Key == nil {
		b.Queue(`DELETE FROM pgimageai.parked WHERE rule = ANY($1)`, o.Rules)
		return
	}
	b.Queue(`DELETE FROM pgimageai.parked WHERE rule = ANY($1) AND source_key = $2::jsonb`, o.Rules, string(o.Key))
}

// RekeyParked moves the parked rows of Rules for a source row to its new
// key after a primary-key change: the row still waits for its model, even
// when its image did not change (then nothing parks at the new key).
type RekeyParked struct {
	Rules          []string
	OldKey, NewKey []byte
}

func (o RekeyParked) Queue(b *pgx.Batch) {
	b.Queue(`DELETE FROM pgimageai.parked n WHERE n.rule = ANY($1) AND n.source_key = $3::jsonb
  AND EXISTS (SELECT FROM pgimageai.parked o WHERE o.rule = n.rule AND o.source_key = $2::jsonb)`, o.Rules, string(o.OldKey), string(o.NewKey))
	b.Queue(`UPDATE pgimageai.parked SET source_key = $3::jsonb, updated_at = now() WHERE rule = ANY($1) AND source_key = $2::jsonb`,
		o.Rules, string(o.OldKey), string(o.NewKey))
}

// ParkedRow is one parked row, as a replay reads it.
type ParkedRow struct {
	Seq  int64
	Rule string
	Key  []byte // source_key JSON
}

// ParkedPage returns up to limit parked rows of rules after seq, in order
// of arrival.
func ParkedPage(ctx context.Context, conn *pgx.Conn, rules []string, after int64, limit int) ([]ParkedRow, error) {
	rows, _ := conn.Query(ctx, `SELECT seq, rule, source_key::text FROM pgimageai.parked
WHERE rule = ANY($1) AND seq > $2 ORDER BY seq LIMIT $3`, rules, after, limit)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ParkedRow, error) {
		var p ParkedRow
		var key string
		err := row.Scan(&p.Seq, &p.Rule, &key)
		p.Key = []byte(key)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("read parked rows: %w", err)
	}
	return out, nil
}

// ParkedCount is how many rows of a rule are parked, and since when the
// oldest.
type ParkedCount struct {
	Rule   string
	Model  string // models.name of the newest parked row
	Rows   int64
	Oldest time.Time
}

// ParkedCounts returns the parked rows per rule of rules (every rule: nil),
// by rule.
func ParkedCounts(ctx context.Context, conn *pgx.Conn, rules []string) ([]ParkedCount, error) {
	rows, _ := conn.Query(ctx, `SELECT rule, (array_agg(model ORDER BY seq DESC))[1], count(*), min(parked_at)
FROM pgimageai.parked WHERE $1::text[] IS NULL OR rule = ANY($1) GROUP BY rule ORDER BY rule`, rules)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ParkedCount, error) {
		var c ParkedCount
		err := row.Scan(&c.Rule, &c.Model, &c.Rows, &c.Oldest)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("count parked rows: %w", err)
	}
	return out, nil
}

// ModelHealth is a row of pgimageai.model_health: one model's circuit as
// a slot's leader last changed it.
type ModelHealth struct {
	Model     string
	Down      bool
	Since     time.Time // down: since when; up: since when again
	DownSince time.Time // up: when the last outage began
	Cause     string
	Probes    int
}

// WriteModelHealth stores a model's circuit for slot.
func WriteModelHealth(ctx context.Context, conn *pgx.Conn, slot string, h ModelHealth) error {
	st := value.EndpointUp
	if h.Down {
		st = value.EndpointDown
	}
	var downSince any
	if !h.DownSince.IsZero() {
		downSince = h.DownSince
	}
	_, err := conn.Exec(ctx, `INSERT INTO pgimageai.model_health AS h (slot, model, state, since, down_since, cause, probes, updated_at)
VALUES ($1, $2, $3, $4, $5, NULLIF($6, ''), $7, now())
ON CONFLICT (slot, model) DO UPDATE SET state = excluded.state, since = excluded.since, down_since = excluded.down_since,
  cause = excluded.cause, probes = excluded.probes, updated_at = excluded.updated_at`,
		slot, h.Model, st, h.Since, downSince, h.Cause, h.Probes)
	if err != nil {
		return fmt.Errorf("store model health: %w", err)
	}
	return nil
}

// ModelHealths reads slot's models' circuits, by model name.
func ModelHealths(ctx context.Context, conn *pgx.Conn, slot string) ([]ModelHealth, error) {
	rows, _ := conn.Query(ctx, `SELECT model, state = 'down', since, down_since, coalesce(cause, ''), probes
FROM pgimageai.model_health WHERE slot = $1 ORDER BY model`, slot)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ModelHealth, error) {
		var h ModelHealth
		var downSince *time.Time
		err := row.Scan(&h.Model, &h.Down, &h.Since, &downSince, &h.Cause, &h.Probes)
		if downSince != nil {
			h.DownSince = *downSince
		}
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("read model health: %w", err)
	}
	return out, nil
}
