// Package replication is pgimageai's only user of pgconn's replication
// protocol and of pglogrepl. It checks the server (Preflight: version,
// wal_level, privileges), owns the publication (SyncPublication) and the
// permanent pgoutput slot (EnsureSlot, ReadSlot), streams changes with
// binary tuples (Stream), answers keepalives, reconnects with backoff, and
// confirms to the slot only the LSNs that the sink acknowledged.
//
// In the flow it is the first stage: Stream.Run emits typed Events (Begin,
// *Change, *Message, Commit, Reset) on a channel in commit order and takes
// acks back through Stream.Ack, the only call that crosses goroutines. The
// setup functions take an ordinary *pgx.Conn; Stream opens its own
// replication connection (replication=database) from a normal DSN.
//
// Positions reported to the server, per standby status update:
//   - flush and apply: the highest position known safe — Run's start (the
//     sink's checkpoint), the slot's confirmed_flush_lsn, the highest ack,
//     and, while the stream is idle for us, the WAL end of a keepalive (see
//     progress.idle) — unless Config.Idle is set: then that WAL end goes to
//     the consumer, which acks it once its checkpoint holds it, so that the
//     slot is never confirmed past a stored checkpoint. This is what the
//     slot keeps as confirmed_flush_lsn.
//
// On PostgreSQL 17 and later the slot is a failover slot (created with
// failover, or turned on with ALTER_REPLICATION_SLOT), so that a physical
// standby keeps a copy of it. While a failover settles — the server reached
// is a standby (ErrInRecovery) or the slot is not on it (ErrNoSlot) — Run
// waits for Config.FailoverWait, then ends with ErrFailoverTimeout.
//   - write: the highest position received, as PostgreSQL's apply worker
//     reports it; the server does not use it for the slot.
//
// Unrecoverable states end Run with an error wrapping a sentinel
// (ErrSlotInvalidated, ErrPrivilege, ErrWALLevel, ...) whose message says
// what to do; everything else is retried. Server errors are classified by
// SQLSTATE, never by message text. See
// https://www.postgresql.org/docs/current/protocol-logical-replication.html
//
// Layer: postgres.
package replication
