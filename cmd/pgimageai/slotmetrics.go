package main

import (
	"context"
	"sync"

	"github.com/pgimageai/pgimageai/internal/reconn"
	"github.com/pgimageai/pgimageai/metrics"
	"github.com/pgimageai/pgimageai/replication"
)

// slotReader reads the slot at scrape time on one connection of its own, opened on first
// use and again after an error. Safe for concurrent use (scrapes take turns).
type slotReader struct {
	slot string
	mu   sync.Mutex
	conn *reconn.Conn
}

func newSlotReader(dsn, slot string) *slotReader {
	return &slotReader{slot: slot, conn: reconn.New("source", dsn, nil)}
}

func (r *slotReader) read(ctx context.Context) (metrics.Slot, error) {
	s := metrics.Slot{Name: r.slot}
	r.mu.Lock()
	defer r.mu.Unlock()
	conn, err := r.conn.Get(ctx)
	if err != nil {
		return s, err
	}
	u, found, err := replication.ReadSlotUsage(ctx, conn, r.slot)
	if err != nil {
		r.conn.Drop(context.Background())
		return s, err
	}
	s.Found, s.Active, s.WALStatus, s.SafeWALSize, s.RetainedBytes = found, u.Active, u.WALStatus, u.SafeWALSize, u.RetainedBytes
	return s, nil
}

func (r *slotReader) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conn.Drop(context.Background())
}
