package replication

// progress is the LSN bookkeeping of one Run, kept across its reconnects: what
// to skip, what was emitted, and what may be confirmed to the slot. Only the
// Run goroutine uses it; acks come in as the acked argument (Stream.acked).
type progress struct {
	// floor: transactions whose commit LSN (Begin.FinalLSN) is below it were
	// applied already and are skipped. It starts at Run's start (the
	// checkpoint, the EndLSN of the last applied transaction) and becomes the
	// EndLSN of each emitted Commit, so that after a reconnect a transaction
	// the server sends again is never emitted twice. Commit LSNs only grow:
	// a commit record starts at or after the end of the previous one.
	floor LSN
	// lastEnd is the EndLSN of the last Commit emitted by this Run; 0 if none.
	lastEnd LSN
	// lastMessage is the LSN of the last non-transactional Message emitted.
	lastMessage LSN
	// confirmed is the highest position known safe to confirm: Run's start,
	// the slot's confirmed_flush_lsn, the highest ack, and idle WAL ends. It
	// never decreases, because a confirmed_flush_lsn that moves backwards
	// would make the server resend acknowledged transactions.
	confirmed LSN
	// sent is the flush position of the last standby status update.
	sent LSN
	// received is the highest WAL position the server has told us about
	// (XLogData positions, keepalive WAL ends) on the current connection:
	// the write position of status updates, as PostgreSQL's own apply
	// worker reports it. A walsender in shutdown waits until the write
	// position reaches what it sent; reporting only acked positions there
	// would hang a fast shutdown of the server while the consumer holds
	// unacked transactions. The server uses only the flush position for the
	// slot.
	received LSN

	inTx     bool // between a Begin and its Commit on the current connection
	skipping bool // the open transaction is below floor and is not emitted
	open     bool // a Begin was emitted whose Commit was not: a Reset is owed on loss
}

func newProgress(start LSN) *progress {
	return &progress{floor: start, confirmed: start}
}

// raise moves confirmed up to lsn; never down.
func (p *progress) raise(lsn LSN) {
	if lsn > p.confirmed {
		p.confirmed = lsn
	}
}

// flush returns the position to confirm given the highest ack.
func (p *progress) flush(acked LSN) LSN {
	p.raise(acked)
	return p.confirmed
}

// receive records a WAL position the server sent.
func (p *progress) receive(lsn LSN) {
	if lsn > p.received {
		p.received = lsn
	}
}

// write returns the write position of a status update: what was received,
// and never less than flush.
func (p *progress) write(flush LSN) LSN {
	return max(p.received, flush)
}

// idle confirms walEnd, the ServerWALEnd of a primary keepalive, when the
// stream is idle for us: no transaction is open on the wire and every Commit
// this Run emitted has been acked. It reports whether confirmed moved.
//
// Why this is safe: in logical replication the keepalive's WAL end is the
// walsender's sentPtr, the end of the last WAL record it has decoded, and
// decoding a commit record sends its whole transaction before sentPtr moves
// past it. So every transaction that committed before walEnd and touched a
// published table has already arrived on this connection (TCP keeps order),
// been emitted and, by the condition, acked; the rest of the WAL below walEnd
// is other tables' changes, which we would skip anyway. Transactions still
// in progress at walEnd commit above it, and the server decodes them again
// from the slot's restart_lsn, which the server holds back for them on its
// own; confirming walEnd does not lose them. PostgreSQL's own apply worker
// does the same (send_feedback in src/backend/replication/logical/worker.c).
// Without it, writes to unpublished tables of an otherwise idle source would
// pin WAL in the slot without bound.
func (p *progress) idle(walEnd, acked LSN) bool {
	if !p.idleFor(walEnd, acked) {
		return false
	}
	p.raise(walEnd)
	return true
}

// idleFor reports whether walEnd may be confirmed as idle (see idle) and is
// above what is confirmed already, without confirming it: with
// Config.Idle the consumer acks it once stored.
func (p *progress) idleFor(walEnd, acked LSN) bool {
	return !p.inTx && acked >= p.lastEnd && walEnd > max(p.confirmed, acked)
}

// begin records a Begin on the wire and reports whether to emit it.
func (p *progress) begin(finalLSN LSN) bool {
	p.inTx = true
	p.skipping = finalLSN < p.floor
	return !p.skipping
}

// commitReceived records a Commit on the wire and reports whether to emit
// it; committed must follow once it was emitted.
func (p *progress) commitReceived() bool {
	p.inTx = false
	emit := !p.skipping
	p.skipping = false
	return emit
}

// committed records that the Commit ending at end was emitted.
func (p *progress) committed(end LSN) {
	p.open = false
	p.lastEnd = end
	if end > p.floor {
		p.floor = end
	}
}

// message reports whether to emit a logical decoding message at lsn:
// transactional ones with their transaction, non-transactional ones once
// (messageEmitted records those).
func (p *progress) message(transactional bool, lsn LSN) bool {
	if transactional {
		return p.inTx && !p.skipping
	}
	return lsn >= p.floor && lsn > p.lastMessage
}

// messageEmitted records that the non-transactional message at lsn was emitted.
func (p *progress) messageEmitted(lsn LSN) {
	p.lastMessage = lsn
}

// lost records the loss of the connection and reports whether a Reset is
// owed to the consumer.
func (p *progress) lost() bool {
	owed := p.open
	p.inTx, p.skipping, p.open = false, false, false
	p.received = 0
	return owed
}
