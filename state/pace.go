package state

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ModelPace is a row of pgimageai.model_pace: one model's pacing as a
// slot's leader last saw it.
type ModelPace struct {
	Model                 string
	InFlight, Limit, Ceil int
	LimitBy               string // why the limit is where it is (pace.Why)
	Pace                  string
	Limited1m, Answered1m int
	Waited                time.Duration
	RateLimited           bool
	UpdatedAt             time.Time     // set by WriteModelPace
	Age                   time.Duration // now() − updated_at on the server, as read
}

// WriteModelPace stores the pacing of slot's models in one transaction and
// deletes the rows of models no longer among them.
func WriteModelPace(ctx context.Context, conn *pgx.Conn, slot string, models []ModelPace) error {
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		names := make([]string, len(models))
		for i, m := range models {
			names[i] = m.Model
			if _, err := tx.Exec(ctx, `INSERT INTO pgimageai.model_pace AS p
  (slot, model, in_flight, concurrency, ceiling, pace, limited_1m, answered_1m, waited_s, rate_limited, updated_at, concurrency_by)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, now(), $11)
ON CONFLICT (slot, model) DO UPDATE SET in_flight = excluded.in_flight, concurrency = excluded.concurrency,
  concurrency_by = excluded.concurrency_by,
  ceiling = excluded.ceiling, pace = excluded.pace, limited_1m = excluded.limited_1m, answered_1m = excluded.answered_1m,
  waited_s = excluded.waited_s, rate_limited = excluded.rate_limited, updated_at = excluded.updated_at`,
				slot, m.Model, m.InFlight, m.Limit, m.Ceil, m.Pace, m.Limited1m, m.Answered1m, m.Waited.Seconds(), m.RateLimited, m.LimitBy); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, "DELETE FROM pgimageai.model_pace WHERE slot = $1 AND NOT model = ANY($2)", slot, names)
		return err
	})
	if err != nil {
		return fmt.Errorf("store model pacing: %w", err)
	}
	return nil
}

// ModelPaces reads the pacing slot's leader last stored, by model name.
func ModelPaces(ctx context.Context, conn *pgx.Conn, slot string) ([]ModelPace, error) {
	rows, _ := conn.Query(ctx, `SELECT model, in_flight, concurrency, concurrency_by, ceiling, pace, limited_1m, answered_1m, waited_s, rate_limited, updated_at,
  extract(epoch FROM now() - updated_at)::float8
FROM pgimageai.model_pace WHERE slot = $1 ORDER BY model`, slot)
	ms, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ModelPace, error) {
		var m ModelPace
		var waited, age float64
		err := row.Scan(&m.Model, &m.InFlight, &m.Limit, &m.LimitBy, &m.Ceil, &m.Pace, &m.Limited1m, &m.Answered1m, &waited, &m.RateLimited, &m.UpdatedAt, &age)
		m.Waited = time.Duration(waited * float64(time.Second))
		m.Age = time.Duration(age * float64(time.Second))
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("read model pacing: %w", err)
	}
	return ms, nil
}

// LanePending is what one lane holds, for pgimageai.lane_pending.
type LanePending struct {
	Lane    string
	Pending int64
	Oldest  time.Time // source commit time of the oldest change held; zero when none
}

// WriteLanePending stores what slot's lanes hold in one transaction and
// deletes the rows of lanes no longer among them.
func WriteLanePending(ctx context.Context, conn *pgx.Conn, slot string, lanes []LanePending) error {
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		names := make([]string, len(lanes))
		for i, l := range lanes {
			names[i] = l.Lane
			var oldest any
			if !l.Oldest.IsZero() {
				oldest = l.Oldest
			}
			if _, err := tx.Exec(ctx, `INSERT INTO pgimageai.lane_pending AS p (slot, lane, pending, oldest_commit_time, updated_at)
VALUES ($1, $2, $3, $4, now())
ON CONFLICT (slot, lane) DO UPDATE SET pending = excluded.pending, oldest_commit_time = excluded.oldest_commit_time, updated_at = excluded.updated_at`,
				slot, l.Lane, l.Pending, oldest); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, "DELETE FROM pgimageai.lane_pending WHERE slot = $1 AND NOT lane = ANY($2)", slot, names)
		return err
	})
	if err != nil {
		return fmt.Errorf("store lanes pending: %w", err)
	}
	return nil
}
