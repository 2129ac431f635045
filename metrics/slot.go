package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgimageai/pgimageai/value"
)

// Slot is the replication slot as pg_replication_slots shows it, read at scrape time.
type Slot struct {
	Name          string
	Found         bool   // the slot exists
	Active        bool   // a walsender streams it
	WALStatus     string // reserved, extended, unreserved or lost ("" before PostgreSQL 13)
	SafeWALSize   *int64 // bytes of WAL that may still be written before the slot is at risk; nil: unlimited
	RetainedBytes int64  // the server's WAL position minus the slot's restart_lsn
}

// walStatuses are the values of pg_replication_slots.wal_status (PostgreSQL 13+).
var walStatuses = value.WALStatuses

// slotScrapeTimeout bounds the query of one scrape: a slow source must not hold up
// /metrics.
const slotScrapeTimeout = 2 * time.Second

// SetSlotSource installs the function that reads the slot at scrape time; the last one
// installed wins. f is called from scrapes, possibly concurrently.
func (m *Metrics) SetSlotSource(f func(ctx context.Context) (Slot, error)) {
	if m != nil {
		m.slot.Store(&f)
	}
}

// slotCollector exports the slot's state. Both leader and standby report it (it is the
// server's view of one slot), so dashboards take max by slot.
type slotCollector struct {
	m                                            *Metrics
	up, active, walStatus, safeWALSize, retained *prometheus.Desc
}

func newSlotCollector(m *Metrics) *slotCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "slot", name), help, append([]string{"slot"}, labels...), nil)
	}
	return &slotCollector{
		m:           m,
		up:          d("up", "1 when the slot was read from pg_replication_slots at this scrape and exists, else 0."),
		active:      d("active", "1 while a walsender streams the slot."),
		walStatus:   d("wal_status", "The slot's wal_status: 1 for the current one of reserved, extended, unreserved, lost.", "wal_status"),
		safeWALSize: d("safe_wal_size_bytes", "WAL that may still be written before the slot is at risk (absent: unlimited, max_slot_wal_keep_size = -1)."),
		retained:    d("retained_wal_bytes", "The server's WAL position minus the slot's restart_lsn: WAL kept for the slot."),
	}
}

func (c *slotCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.active, c.walStatus, c.safeWALSize, c.retained} {
		ch <- d
	}
}

func (c *slotCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.m.slot.Load()
	if f == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), slotScrapeTimeout)
	defer cancel()
	s, err := (*f)(ctx)
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{s.Name}, labels...)...)
	}
	if err != nil || !s.Found {
		gauge(c.up, 0)
		return
	}
	gauge(c.up, 1)
	gauge(c.active, b2f(s.Active))
	if s.WALStatus != "" {
		for _, w := range walStatuses {
			gauge(c.walStatus, b2f(w == s.WALStatus), w)
		}
	}
	if s.SafeWALSize != nil {
		gauge(c.safeWALSize, float64(*s.SafeWALSize))
	}
	gauge(c.retained, float64(s.RetainedBytes))
}
