package value

// The states the bookkeeping tables hold. Each type's values are the ones
// its table's CHECK constraint allows (migrations/sql), so that a typo is a
// compile error, not a row the database refuses or a compare that never
// matches.

// BackfillState is pgimageai.backfills.state.
type BackfillState string

const (
	BackfillRunning BackfillState = "running"
	BackfillDone    BackfillState = "done"
	// BackfillQueued: reconciliation queued a range of keys; the bridge
	// picks it up at its next check.
	BackfillQueued BackfillState = "queued"
)

// SwitchState is pgimageai.switches.state.
type SwitchState string

const (
	SwitchComputing SwitchState = "computing"
	SwitchIndexing  SwitchState = "indexing"
	SwitchReady     SwitchState = "ready"
	SwitchHeld      SwitchState = "held"
	SwitchAborted   SwitchState = "aborted"
)

// SwitchRequest is pgimageai.switches.request: an operator's, read by the
// bridge; "" when there is none.
type SwitchRequest string

const (
	SwitchForce SwitchRequest = "force" // switch with the failed rows left NULL
	SwitchAbort SwitchRequest = "abort" // drop the shadow column and the side work
)

// SwitchOutcome is pgimageai.switch_history.outcome.
type SwitchOutcome string

const (
	SwitchSwitched  SwitchOutcome = "switched"
	SwitchForced    SwitchOutcome = "forced"
	SwitchGaveUp    SwitchOutcome = "aborted"
	SwitchCancelled SwitchOutcome = "cancelled"
)

// EndpointState is pgimageai.model_health.state: whether a model's
// endpoint answers.
type EndpointState string

const (
	EndpointUp   EndpointState = "up"
	EndpointDown EndpointState = "down"
)

// BatchStatus is pgimageai.backfill_batches.status: "uploaded", then the
// provider's status of the Batch API job, or one of the bridge's own below.
// Only the statuses the bridge compares against are named. It is an alias of
// string: the provider's answer is free text, carried as it came.
type BatchStatus = string

const (
	// BatchRefused: the provider refused to take the batch (its upload or
	// its creation, for good): its rows get synchronous calls.
	BatchRefused BatchStatus = "refused"
	// BatchNotFound: the provider no longer knows the job.
	BatchNotFound BatchStatus = "not_found"
	// BatchCancelling: the provider is cancelling the job.
	BatchCancelling BatchStatus = "cancelling"
	// The provider's final statuses.
	BatchCompleted BatchStatus = "completed"
	BatchFailed    BatchStatus = "failed"
	BatchExpired   BatchStatus = "expired"
	BatchCancelled BatchStatus = "cancelled"
)

// WALStatus is pg_replication_slots.wal_status, PostgreSQL's own text, an
// alias of string like BatchStatus.
type WALStatus = string

const (
	WALReserved   WALStatus = "reserved"
	WALExtended   WALStatus = "extended"
	WALUnreserved WALStatus = "unreserved" // past max_slot_wal_keep_size: lost at the next checkpoint
	WALLost       WALStatus = "lost"       // the slot lost WAL it needs
)

// WALStatuses are the values of WALStatus, in PostgreSQL's order.
var WALStatuses = []WALStatus{WALReserved, WALExtended, WALUnreserved, WALLost}
