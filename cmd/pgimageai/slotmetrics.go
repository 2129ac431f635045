package main

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/metrics"
)

// slotMetricsSQL reads the slot for the pgimageai_slot_* metrics. to_jsonb spares a query
// per server version: wal_status and safe_wal_size exist from PostgreSQL 13 on.
const slotMetricsSQL = `SELECT s.active, coalesce(to_jsonb(s) ->> 'wal_status', ''), (to_jsonb(s) ->> 'safe_wal_size')::bigint,
  coalesce(pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END, s.restart_lsn), 0)::bigint
FROM pg_replication_slots s WHERE s.slot_name = $1`

// slotReader reads the slot at scrape time on one connection of its own, opened on first
// use and again after an error. Safe for concurrent use (scrapes take turns).
type slotReader struct {
	dsn, slot string
	mu        sync.Mutex
	conn      *pgx.Conn
}

func (r *slotReader) read(ctx context.Context) (metrics.Slot, error) {
	s := metrics.Slot{Name: r.slot}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn == nil {
		conn, err := pgx.Connect(ctx, r.dsn)
		if err != nil {
			return s, err
		}
		r.conn = conn
	}
	err := r.conn.QueryRow(ctx, slotMetricsSQL, r.slot).Scan(&s.Active, &s.WALStatus, &s.SafeWALSize, &s.RetainedBytes)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return s, nil
	case err != nil:
		r.conn.Close(context.Background())
		r.conn = nil
		return s, err
	}
	s.Found = true
	return s, nil
}

func (r *slotReader) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn != nil {
		r.conn.Close(context.Background())
		r.conn = nil
	}
}
