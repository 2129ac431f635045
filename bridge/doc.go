// Package bridge is the orchestration between replication and sink: it loads
// and validates the rules, matches each change to the rules of its table,
// calls the AI functions concurrently (bounded per model by the providers and
// overall by a byte budget on images in flight), de-duplicates identical work
// through a bounded cache, and hands results to the sink in source commit
// order, one target transaction per batch. Acks flow back to replication only
// after the sink committed.
package bridge
