// Package sink writes the target tables: the upserts of result columns,
// deletes, primary-key moves and truncates of one lane's chunk, in ONE target
// transaction with the lane's checkpoint (queued by package state, with the
// errors rows and progress that belong with the results), so that a chunk is
// durable whole or not at all.
//
// It also creates missing target tables and columns and validates existing
// ones, records the tables it creates and widens their key columns when the
// source's key is widened (widen.go: which type changes are widenings), and
// deletes results whose source row is gone (recover-slot). For a rule whose
// version changes, it adds the shadow column beside the live one, copies the
// live column's indexes onto it concurrently, says what would hold the
// switch, and switches the columns in the lane's transaction (shadow.go).
// Every identifier is quoted with pgx.Identifier.
//
// Layer: sink.
package sink
