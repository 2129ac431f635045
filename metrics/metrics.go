package metrics

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Namespace prefixes every metric name.
const Namespace = "pgimageai"

// Status is the bridge's state at one moment, read at scrape time.
type Status struct {
	Streaming     bool   // the replication stream is connected and streaming
	Leader        bool   // this process holds the slot's leader lock (standby: false)
	Standby       bool   // waiting for the lock with a working connection to the source
	ServerWALEnd  uint64 // the latest server WAL end seen on the stream
	Confirmed     uint64 // the flush LSN last confirmed to the slot
	BytesInFlight int64  // image bytes (plus per-call overhead) held by calls in flight
	Reconnects    int64  // replication connections lost and re-established
	// Applied is the source commit time of the last transaction that every
	// lane has made durable (zero: none yet).
	Applied time.Time
	Lanes   []Lane // one per target table
	// StallAfter is how long a lane may hold changes without writing before
	// /healthz says "stalled"; 0 = never.
	StallAfter time.Duration
	Models     []Model // one per model the rules call, when its provider is paced
}

// LagBytes is the replication lag: server WAL end minus confirmed, 0 when
// nothing is known yet or the slot is ahead.
func (s Status) LagBytes() uint64 {
	if s.Confirmed == 0 || s.ServerWALEnd <= s.Confirmed {
		return 0
	}
	return s.ServerWALEnd - s.Confirmed
}

// Metrics is the set of pgimageai's collectors on a registry of its own.
// The zero value is not usable; a nil *Metrics records nothing.
type Metrics struct {
	reg *prometheus.Registry

	streamSeries
	callSeries
	errorSeries
	upkeepSeries
	budgetSeries

	// gone: the rules and models whose series were forgotten; a call of
	// theirs that ends later does not make them again (see ForgetRule).
	gone struct {
		sync.Mutex
		rules, models map[string]time.Time // since when
	}

	status  atomic.Pointer[func() Status]
	outages outages // the models' circuits and the parked rows
	slot    atomic.Pointer[func(context.Context) (Slot, error)]
}

// New returns Metrics registered on a new registry, with the Go runtime and
// process collectors.
// streamSeries count what flows from the stream to the target.
type streamSeries struct {
	changes     *prometheus.CounterVec // op
	rowsWritten *prometheus.CounterVec // op
	batches     prometheus.Counter
}

// callSeries count the provider calls.
type callSeries struct {
	calls     *prometheus.CounterVec   // rule, model, outcome
	latency   *prometheus.HistogramVec // rule, model
	retries   *prometheus.CounterVec   // model
	cacheHits *prometheus.CounterVec   // rule
}

// errorSeries count the failures, written or dropped at the cap.
type errorSeries struct {
	errors  *prometheus.CounterVec // reason
	dropped *prometheus.CounterVec // rule, reason
}

// upkeepSeries count the bookkeeping's own events.
type upkeepSeries struct {
	pruned   *prometheus.CounterVec // table
	slotGaps *prometheus.CounterVec // cause
}

// budgetSeries are the models' daily budgets, spent and allowed.
type budgetSeries struct {
	budgetUsed  *prometheus.GaugeVec // model, unit
	budgetLimit *prometheus.GaugeVec // model, unit
}

func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
	}
	m.changes = counter("changes_total", "Row changes read from the replication stream, by operation.", "op")
	m.calls = counter("provider_calls_total", "Provider calls finished, by rule, model and outcome (ok or a reason code).", "rule", "model", "outcome")
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "provider_call_duration_seconds",
		Help: "Time of one function call at the provider, retries and rate-limit waits included.",
		// 10 ms to ~82 s: local models answer in milliseconds, vision chat in seconds.
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
	}, []string{"rule", "model"})
	m.retries = counter("provider_retries_total", "Provider requests retried after a transient failure, by model.", "model")
	m.cacheHits = counter("cache_hits_total", "Calls saved by the result cache or an identical call in flight, by rule.", "rule")
	m.errors = counter("errors_total", "Rows written to pgimageai.errors, by reason.", "reason")
	m.dropped = counter("errors_dropped_total", "Failures not written to pgimageai.errors because their rule was at its cap of open errors rows (pgimageai.error_caps), by rule and reason; pgimageai.error_counts.dropped counts them too.", "rule", "reason")
	m.rowsWritten = counter("rows_written_total", "Target rows written (committed), by operation.", "op")
	m.pruned = counter("retention_deleted_rows_total", "Bookkeeping rows the retention deleted (errors_resolved: open errors of deleted rules resolved), by table.", "table")
	m.slotGaps = counter("slot_gaps_total", "Times the slot was found to have skipped changes (slot_missing, slot_ahead), each followed by a backfill of every rule.", "cause")
	m.batches = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "batches_total", Help: "Target transactions committed."})

	gauge := func(name, help string, f func(Status) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help},
			func() float64 { return f(m.Status()) })
	}
	m.budgetUsed = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "budget_used",
		Help: "What a model spent on the current UTC day, in calls (answered and in flight) or tokens."}, []string{"model", "unit"})
	m.budgetLimit = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "budget_limit",
		Help: "A model's daily cap (max_calls_per_day, max_tokens_per_day); 0 = none."}, []string{"model", "unit"})
	m.reg.MustRegister(m.budgetUsed, m.budgetLimit)
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.changes, m.calls, m.latency, m.retries, m.cacheHits, m.errors, m.dropped, m.rowsWritten, m.batches, m.pruned, m.slotGaps, laneCollector{m}, modelCollector{m}, outageCollector{m},
		gauge("streaming", "1 while the replication stream is streaming, else 0.", func(s Status) float64 { return b2f(s.Streaming) }),
		gauge("leader", "1 while this process holds the slot's leader lock, 0 while it waits as a standby.", func(s Status) float64 { return b2f(s.Leader) }),
		gauge("replication_lag_bytes", "Server WAL end minus the LSN confirmed to the slot.", func(s Status) float64 { return float64(s.LagBytes()) }),
		gauge("confirmed_lsn", "The flush LSN last confirmed to the slot, as a number.", func(s Status) float64 { return float64(s.Confirmed) }),
		gauge("bytes_in_flight", "Image bytes held by provider calls in flight (the byte budget in use).", func(s Status) float64 { return float64(s.BytesInFlight) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: "last_applied_commit_timestamp_seconds",
			Help: "Source commit time of the last transaction every lane has applied to the target (Unix seconds); time() minus it is the apply delay."},
			func() float64 { return unixSeconds(m.Status().Applied) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: Namespace, Name: "replication_reconnects_total",
			Help: "Replication connections lost and re-established."}, func() float64 { return float64(m.Status().Reconnects) }),
		newSlotCollector(m),
	)
	return m
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// ForgetRule deletes the series of a rule that no longer runs (deleted,
// disabled or invalid), so that the scrape does not carry it for good.
//
// A call of the rule that was in flight and ends afterwards records
// nothing: its series would come back for good. Known undoes it when a rule
// of that name runs again.
func (m *Metrics) ForgetRule(rule string) {
	if m == nil {
		return
	}
	m.gone.Lock()
	defer m.gone.Unlock()
	m.gone.rules = forget(m.gone.rules, rule)
	m.calls.DeletePartialMatch(prometheus.Labels{"rule": rule})
	m.latency.DeletePartialMatch(prometheus.Labels{"rule": rule})
	m.cacheHits.DeleteLabelValues(rule)
	m.dropped.DeletePartialMatch(prometheus.Labels{"rule": rule})
}

// ForgetModel deletes the series of a model no rule calls any more.
func (m *Metrics) ForgetModel(model string) {
	if m == nil {
		return
	}
	m.gone.Lock()
	defer m.gone.Unlock()
	m.gone.models = forget(m.gone.models, model)

	m.retries.DeleteLabelValues(model)
	m.budgetUsed.DeletePartialMatch(prometheus.Labels{"model": model})
	m.budgetLimit.DeletePartialMatch(prometheus.Labels{"model": model})
}

// Known records that rule, calling model, runs (again): its series are
// recorded even if a rule or model of that name was forgotten before.
func (m *Metrics) Known(rule, model string) {
	if m == nil {
		return
	}
	m.gone.Lock()
	delete(m.gone.rules, rule)
	delete(m.gone.models, model)
	m.gone.Unlock()
}

// live reports, with m.gone held, whether rule and model (either may be
// "") have not been forgotten.
func (m *Metrics) live(rule, model string) bool {
	_, r := m.gone.rules[rule]
	_, md := m.gone.models[model]
	return !r && !md
}

// goneFor is how long a forgotten name is remembered: longer than any call
// in flight may still take (timeouts, retries, rate-limit waits), short
// enough that a deployment creating and deleting rules does not remember
// them all.
const goneFor = time.Hour

// forget adds name to gone, dropping the names forgotten longer ago than
// goneFor.
func forget(gone map[string]time.Time, name string) map[string]time.Time {
	now := time.Now()
	if gone == nil {
		gone = map[string]time.Time{}
	}
	for n, at := range gone {
		if now.Sub(at) > goneFor {
			delete(gone, n)
		}
	}
	gone[name] = now
	return gone
}

// Pruned counts rows the retention deleted from table.
func (m *Metrics) Pruned(table string, n int64) {
	if m == nil || n <= 0 {
		return
	}
	m.pruned.WithLabelValues(table).Add(float64(n))
}

// SlotGap counts a gap in the stream found at start, by cause.
func (m *Metrics) SlotGap(cause string) {
	if m == nil {
		return
	}
	m.slotGaps.WithLabelValues(cause).Inc()
}

// Registry returns the registry the collectors are on.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// SetStatus installs the function that reports the bridge's state; the last
// one installed wins. f must be safe for concurrent use and fast.
func (m *Metrics) SetStatus(f func() Status) {
	if m != nil {
		m.status.Store(&f)
	}
}

// Status returns the state reported by the installed function, or the zero
// Status (not streaming) when there is none.
func (m *Metrics) Status() Status {
	if m == nil {
		return Status{}
	}
	if f := m.status.Load(); f != nil {
		return (*f)()
	}
	return Status{}
}

// Change counts one row change read, by its operation (insert, update, ...).
func (m *Metrics) Change(op string) {
	if m != nil {
		m.changes.WithLabelValues(op).Inc()
	}
}

// Call records one finished provider call of rule on model: its outcome
// ("ok" or a reason code) and how long it took.
func (m *Metrics) Call(rule, model, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.gone.Lock()
	defer m.gone.Unlock()
	if m.live(rule, model) {
		m.calls.WithLabelValues(rule, model, outcome).Inc()
		m.latency.WithLabelValues(rule, model).Observe(d.Seconds())
	}
}

// Retry counts one retried provider request of model.
func (m *Metrics) Retry(model string) {
	if m == nil {
		return
	}
	m.gone.Lock()
	defer m.gone.Unlock()
	if m.live("", model) {
		m.retries.WithLabelValues(model).Inc()
	}
}

// CacheHit counts one call of rule served without the provider.
func (m *Metrics) CacheHit(rule string) {
	if m == nil {
		return
	}
	m.gone.Lock()
	defer m.gone.Unlock()
	if m.live(rule, "") {
		m.cacheHits.WithLabelValues(rule).Inc()
	}
}

// Written records a committed target transaction of a lane: rows written
// by operation and errors rows by reason.
func (m *Metrics) Written(rows map[string]int, errorsByReason map[string]int) {
	if m == nil {
		return
	}
	m.batches.Inc()
	for op, n := range rows {
		m.rowsWritten.WithLabelValues(op).Add(float64(n))
	}
	for reason, n := range errorsByReason {
		m.errors.WithLabelValues(reason).Add(float64(n))
	}
}

// ErrorsDropped counts n failures of rule with reason that a committed
// target transaction did not write as errors rows: the rule was at its cap.
func (m *Metrics) ErrorsDropped(rule, reason string, n int) {
	if m == nil || n <= 0 {
		return
	}
	m.gone.Lock()
	defer m.gone.Unlock()
	if m.live(rule, "") {
		m.dropped.WithLabelValues(rule, reason).Add(float64(n))
	}
}

// Budget records what model spent today in unit (calls or tokens) and its
// cap (0: none).
func (m *Metrics) Budget(model, unit string, used, limit int64) {
	if m == nil {
		return
	}
	m.gone.Lock()
	defer m.gone.Unlock()
	if m.live("", model) {
		m.budgetUsed.WithLabelValues(model, unit).Set(float64(used))
		m.budgetLimit.WithLabelValues(model, unit).Set(float64(limit))
	}
}
