// Package backfill reads the rows that already exist in a rule's source
// table: a Worker reads keyset pages bounded by rows and image bytes
// (pages.go), hands each page to the engine and places a marker message in
// the WAL, where the engine applies the page; a model with batch_api sends
// the rows through the provider's Batch API first (batch.go, collect.go,
// batchjobs.go), and the batches of given-up backfills are cancelled and
// deleted at the provider (cleanup.go). It also builds the queries of a
// retry's reads (ByKeysSQL).
//
// It sits below bridge/engine, which starts and stops workers and applies
// their pages; pages go up through the hand function, daily-budget
// reservations through Reserver, the byte budget through Charger. It calls
// nothing above it.
//
// Layer: parts.
package backfill
