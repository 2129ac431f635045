package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Lane is the state of one lane (a target table) at one moment.
type Lane struct {
	Name       string    // the target table
	Pending    int64     // changes routed to the lane and not yet written
	Applied    uint64    // commit LSN of the last source transaction the lane wrote (in part or whole)
	CommitTime time.Time // its source commit time; zero before the first write
	// Stalled is how long the lane has held items without writing any:
	// since its last write, or since it last went from empty to holding
	// something; 0 while it holds nothing.
	Stalled time.Duration
	// Oldest is the source commit time of the oldest change the lane
	// holds; zero while it holds nothing.
	Oldest time.Time
}

// LagBytes is how far the lane is behind the server: 0 when it holds nothing
// (it has written all the bridge read), else WAL end minus the greater of
// what it applied and what the slot confirmed (everything below the
// confirmed LSN is applied by every lane).
func (l Lane) LagBytes(s Status) uint64 {
	if l.Pending == 0 {
		return 0
	}
	at := max(l.Applied, s.Confirmed)
	if at == 0 || s.ServerWALEnd <= at {
		return 0
	}
	return s.ServerWALEnd - at
}

var (
	lanePending = prometheus.NewDesc(Namespace+"_lane_pending_changes",
		"Changes routed to a lane (target table) and not yet written.", []string{"lane"}, nil)
	laneLag = prometheus.NewDesc(Namespace+"_lane_lag_bytes",
		"Server WAL end minus what a lane (target table) has applied.", []string{"lane"}, nil)
	laneStalled = prometheus.NewDesc(Namespace+"_lane_stalled_seconds",
		"How long a lane (target table) has held changes without writing any; 0 while it holds none.", []string{"lane"}, nil)
	laneApplied = prometheus.NewDesc(Namespace+"_lane_last_applied_commit_timestamp_seconds",
		"Source commit time of the last transaction a lane (target table) wrote (Unix seconds); time() minus it is the lane's apply delay.", []string{"lane"}, nil)
)

// laneCollector exports the lanes of the installed Status.
type laneCollector struct{ m *Metrics }

func (laneCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- lanePending
	ch <- laneLag
	ch <- laneApplied
	ch <- laneStalled
}

func (c laneCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.m.Status()
	for _, l := range s.Lanes {
		ch <- prometheus.MustNewConstMetric(lanePending, prometheus.GaugeValue, float64(l.Pending), l.Name)
		ch <- prometheus.MustNewConstMetric(laneLag, prometheus.GaugeValue, float64(l.LagBytes(s)), l.Name)
		ch <- prometheus.MustNewConstMetric(laneApplied, prometheus.GaugeValue, unixSeconds(l.CommitTime), l.Name)
		ch <- prometheus.MustNewConstMetric(laneStalled, prometheus.GaugeValue, l.Stalled.Seconds(), l.Name)
	}
}

func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}
