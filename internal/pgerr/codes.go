package pgerr

// The SQLSTATEs the module acts on, named as PostgreSQL names their
// conditions (https://www.postgresql.org/docs/current/errcodes-appendix.html).
// Compare them with SQLState(err); name a new one here rather than writing
// its code where it is used.
const (
	UniqueViolation                   = "23505" // class 23 integrity constraint violation
	InvalidAuthorizationSpecification = "28000" // no pg_hba.conf entry, role not permitted
	InvalidPassword                   = "28P01"
	InvalidCatalogName                = "3D000" // the database does not exist
	InvalidSchemaName                 = "3F000"
	InsufficientPrivilege             = "42501"
	InvalidName                       = "42602"
	UndefinedColumn                   = "42703"
	UndefinedObject                   = "42704"
	DuplicateObject                   = "42710"
	DatatypeMismatch                  = "42804"
	UndefinedTable                    = "42P01"
	DuplicateTable                    = "42P07"
	ConfigurationLimitExceeded        = "53400" // e.g. "all replication slots are in use"
	ObjectNotInPrerequisiteState      = "55000" // e.g. "cannot read from logical replication slot", wal_level
	ObjectInUse                       = "55006" // e.g. "replication slot ... is active for PID ..."
	LockNotAvailable                  = "55P03" // lock_timeout
	CannotConnectNow                  = "57P03" // the server is starting up or shutting down
	UndefinedFile                     = "58P01" // e.g. "requested WAL segment ... has already been removed"
)
