package replication

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/internal/pgerr"
)

// The errors of this package that call for a person: each is returned wrapped
// in a message that says what to do, so test them with errors.Is.
var (
	// ErrVersion: the server is older than PostgreSQL 14, the first release
	// whose pgoutput sends binary tuples and logical decoding messages.
	ErrVersion = errors.New("unsupported PostgreSQL version")
	// ErrWALLevel: wal_level is not logical.
	ErrWALLevel = errors.New("wal_level is not logical")
	// ErrPrivilege: the role lacks REPLICATION or a privilege a step needs.
	ErrPrivilege = errors.New("insufficient privilege")
	// ErrNoFreeSlot: every replication slot of max_replication_slots is taken.
	ErrNoFreeSlot = errors.New("no free replication slot")
	// ErrSlotInvalidated: the slot can no longer stream (wal_status lost,
	// invalidated, or the WAL it needs was removed).
	ErrSlotInvalidated = errors.New("replication slot invalidated")
	// ErrNoSlot: the slot does not exist (EnsureSlot was not called, or
	// someone dropped it).
	ErrNoSlot = errors.New("replication slot does not exist")
	// ErrSlotMismatch: a slot of that name exists but is not a permanent
	// pgoutput logical slot of this database.
	ErrSlotMismatch = errors.New("replication slot is not usable")
	// ErrNoPublication: the publication does not exist.
	ErrNoPublication = errors.New("publication does not exist")
	// ErrProtocol: the server sent something this package cannot decode.
	ErrProtocol = errors.New("pgoutput protocol error")
	// ErrFailoverTimeout: a failover did not settle within
	// Config.FailoverWait; it wraps the last error, which says what to do.
	ErrFailoverTimeout = errors.New("the source did not settle")
	// ErrInRecovery: the server is a standby in recovery, not a primary
	// (a multi-host DSN without target_session_attrs=read-write, or a
	// failover not finished yet).
	ErrInRecovery = errors.New("server is in recovery")

	// errConfig: the Config cannot work (e.g. an unparsable ConnString).
	errConfig = errors.New("replication config")
)

// retryable reports whether Run should reconnect after err rather than
// return it. Server errors are retried when pgerr.Transient says so (SQLSTATE
// classes 08 connection exception, 40 transaction rollback, 53 insufficient
// resources such as too many connections, 57 operator intervention such as
// admin_shutdown after pg_terminate_backend or a restart and
// cannot_connect_now while starting up, 58 system error, XX internal error),
// and on top of it 55006 object_in_use (the walsender of a killed
// predecessor still holds the slot); not 58P01 undefined_file, which here
// means the WAL the slot needs was removed (explain turns it into
// ErrSlotInvalidated). Every other server error is a configuration problem
// that a retry will not fix. Errors that are not server errors (network, EOF,
// refused connections, TLS, timeouts) are retried, except the package's own
// fatal sentinels. The caller checks its context first: after ctx ends
// nothing is retried.
func retryable(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, ErrVersion), errors.Is(err, ErrWALLevel), errors.Is(err, ErrPrivilege),
		errors.Is(err, ErrNoFreeSlot), errors.Is(err, ErrSlotInvalidated), errors.Is(err, ErrNoSlot),
		errors.Is(err, ErrSlotMismatch), errors.Is(err, ErrNoPublication), errors.Is(err, ErrProtocol),
		errors.Is(err, errConfig), errors.Is(err, ErrInRecovery):
		return false
	}
	switch pgerr.SQLState(err) {
	case "":
		return true
	case pgerr.ObjectInUse:
		return true
	case pgerr.UndefinedFile:
		return false
	}
	return pgerr.Transient(err)
}

// explain turns a fatal server error into one of the package's sentinels
// with advice, where it maps onto one; user is the login role.
func explain(err error, user string) error {
	switch pgerr.SQLState(err) {
	case pgerr.InsufficientPrivilege:
		return fmt.Errorf("%w: role %q may not stream changes; run ALTER ROLE %s REPLICATION (or use a superuser): %v",
			ErrPrivilege, user, pgx.Identifier{user}.Sanitize(), err)
	case pgerr.InvalidAuthorizationSpecification, pgerr.InvalidPassword:
		return fmt.Errorf("%w: role %q cannot log in; check the password and pg_hba.conf (a logical replication connection matches the entries of its database): %v",
			ErrPrivilege, user, err)
	case pgerr.UndefinedFile:
		return slotInvalidated("", "the WAL it needs was removed: "+err.Error())
	case pgerr.InvalidCatalogName:
		return fmt.Errorf("database does not exist: %w", err)
	}
	return err
}

// slotInvalidated returns ErrSlotInvalidated with the recovery procedure:
// the pgimageai command that does it, and what it does, so that a person
// without the command knows what to do by hand.
func slotInvalidated(slot, why string) error {
	name := "<slot>"
	if slot != "" {
		name = slot
	}
	return fmt.Errorf("%w: slot %s %s; changes made since cannot be streamed any more. To recover, run pgimageai recover-slot with the settings of pgimageai run: "+
		"it drops the slot (SELECT pg_drop_replication_slot('%s')) and re-creates it, deletes the results of source rows deleted meanwhile, "+
		"and makes every enabled rule backfill; then start pgimageai run again",
		ErrSlotInvalidated, name, why, name)
}

// inRecovery returns ErrInRecovery for the server at host, with what to do.
func inRecovery(host string) error {
	return fmt.Errorf("%w: the server at %s is a standby (pg_is_in_recovery() is true), which cannot stream for pgimageai; "+
		"list every host in the DSN with target_session_attrs=read-write (e.g. host=pg1,pg2 target_session_attrs=read-write), or wait for its promotion", ErrInRecovery, host)
}

// Settling reports whether err is a state that a failover in progress
// passes through and that ends by itself once the new primary is up and its
// copy of the slot usable: the slot missing on the server reached, or that
// server still a standby. Stream.Run waits these out for
// Config.FailoverWait, then stops with what to do. (A server that cannot be
// reached at all is retried without a limit, as any lost connection.)
func Settling(err error) bool {
	return errors.Is(err, ErrNoSlot) || errors.Is(err, ErrInRecovery)
}
