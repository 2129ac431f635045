// Package metrics holds pgimageai's Prometheus collectors and the HTTP handler
// that serves them with /healthz (--metrics-addr).
//
// It sits beside the flow, not in it: bridge and cmd/pgimageai record into a
// *Metrics, and the bridge installs a status source that the handler reads at
// scrape time (streaming, leadership, replication lag, bytes in flight).
// Every method is safe for concurrent use, and every method of a nil *Metrics
// does nothing, so code paths need no "metrics enabled?" checks.
//
// Layer: metrics.
package metrics
