// Package sink writes the results of a batch of source transactions to the
// target database in ONE transaction: upserts of result columns, deletes,
// primary-key moves, truncates, errors rows and their resolution, and the
// checkpoint LSN (SPEC §5). Only after that transaction commits does the
// caller acknowledge the batch to the replication slot.
//
// It also creates missing target tables and columns and validates existing
// ones. Every identifier is quoted with pgx.Identifier.
package sink
