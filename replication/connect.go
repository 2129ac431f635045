package replication

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgimageai/pgimageai/internal/pgconnect"
	"github.com/pgimageai/pgimageai/internal/pgread"
)

// pluginArgs are the pgoutput options of START_REPLICATION: protocol 1 (no
// streaming of in-progress transactions, no two-phase), binary tuples and
// logical decoding messages, both PostgreSQL 14+. See
// https://www.postgresql.org/docs/current/protocol-logical-replication.html
func pluginArgs(publicationLiteral string) []string {
	return []string{
		"proto_version '1'",
		"publication_names " + publicationLiteral,
		"binary 'true'",
		"messages 'true'",
	}
}

// connect opens the replication connection, checks the slot and the
// publication, starts streaming and confirms the start position. It returns
// that position. ss.conn is set as soon as a connection exists, so the
// caller closes it on error too.
func (ss *session) connect(ctx context.Context) (LSN, error) {
	cfg := ss.s.cfg
	pc, err := pgconnect.ParseConn(cfg.ConnString)
	if err != nil {
		// Not even the parser's message: its redaction of passwords is best
		// effort, and a URL error quotes the whole string.
		return 0, fmt.Errorf("%w: the connection string cannot be parsed (not shown: it may hold a password)", errConfig)
	}
	ss.user = pc.User
	pc.RuntimeParams["replication"] = "database"
	// pgoutput writes text values with the session's output functions; hex
	// is the bytea form that pgx decodes (Value.Bytea).
	pc.RuntimeParams["bytea_output"] = "hex"
	if pc.RuntimeParams["application_name"] == "" {
		pc.RuntimeParams["application_name"] = "pgimageai"
	}
	if pc.ConnectTimeout == 0 {
		pc.ConnectTimeout = cfg.ConnectTimeout
	}
	// pc.BuildContextWatcherHandler stays pgconn's default, the deadline
	// handler: a context that ends during a read sets a deadline on the
	// socket and never sends a CancelRequest, which would end the walsender's
	// stream with an error. A connection string cannot change it.
	// A backlog arrives in reads of up to 256 KiB rather than one or two
	// per message (an 8 KB image is a message of its own): those reads were
	// 4% of the bridge's CPU in a catch-up.
	pgread.Buffer(pc)
	conn, err := pgconn.ConnectConfig(ctx, pc)
	if err != nil {
		return 0, err
	}
	ss.conn = conn
	ss.dec = newDecoder()

	slot, err := ss.checkSource(ctx)
	if err != nil {
		return 0, err
	}
	ss.p.raise(slot.ConfirmedFlushLSN)
	start := ss.p.confirmed

	pub, err := conn.EscapeString(pgx.Identifier{cfg.Publication}.Sanitize())
	if err != nil {
		return 0, err
	}
	err = pglogrepl.StartReplication(ctx, conn, cfg.Slot, pglogrepl.LSN(start), pglogrepl.StartReplicationOptions{
		Mode:       pglogrepl.LogicalReplication,
		PluginArgs: pluginArgs("'" + pub + "'"),
	})
	if err != nil {
		return 0, fmt.Errorf("start replication on slot %s at %s: %w", cfg.Slot, start, err)
	}
	// Confirm the start at once: it is the checkpoint or the slot's own
	// position, both safe, and never 0.
	return start, ss.status(ctx, true)
}

// checkSource reads, over the replication connection (simple query protocol
// only), the slot, wal_level and whether the publication exists, and turns
// the fatal states into the package's errors before START_REPLICATION could
// report them less clearly.
func (ss *session) checkSource(ctx context.Context) (Slot, error) {
	cfg := ss.s.cfg
	// The slot name is ValidSlotName (checked by Run); both literals are
	// escaped by pgconn regardless.
	slotLit, err := ss.conn.EscapeString(cfg.Slot)
	if err != nil {
		return Slot{}, err
	}
	pubLit, err := ss.conn.EscapeString(cfg.Publication)
	if err != nil {
		return Slot{}, err
	}
	sql := "SELECT (" + selectSlot + "'" + slotLit + "'), current_database(), current_setting('wal_level')," +
		" EXISTS (SELECT FROM pg_publication WHERE pubname = '" + pubLit + "')::text, pg_is_in_recovery()::text"
	res, err := ss.conn.Exec(ctx, sql).ReadAll()
	if err != nil {
		return Slot{}, fmt.Errorf("check slot %s: %w", cfg.Slot, err)
	}
	if len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) != 5 {
		return Slot{}, fmt.Errorf("%w: unexpected result of the slot check", ErrProtocol)
	}
	row := res[0].Rows[0]
	db, walLevel := string(row[1]), string(row[2])
	if strings.EqualFold(string(row[4]), "true") {
		return Slot{}, inRecovery(ss.host())
	}
	if walLevel != "logical" {
		return Slot{}, fmt.Errorf("%w: wal_level is %q; set wal_level = logical and restart PostgreSQL", ErrWALLevel, walLevel)
	}
	if row[0] == nil {
		return Slot{}, fmt.Errorf("%w: slot %s is not in pg_replication_slots of the server at %s: it was dropped, or the primary failed over to a standby that had no copy of it "+
			"(failover slots need PostgreSQL 17 and sync_replication_slots = on on the standby). Start pgimageai run again: it creates the slot and backfills every rule from the rows as they are now; rows already computed cost no provider calls",
			ErrNoSlot, cfg.Slot, ss.host())
	}
	slot, err := parseSlot(row[0])
	if err != nil {
		return Slot{}, err
	}
	if err := slot.check(db); err != nil {
		return Slot{}, err
	}
	if !strings.EqualFold(string(row[3]), "true") {
		return Slot{}, fmt.Errorf("%w: publication %s; create it with SyncPublication (pgimageai run does)",
			ErrNoPublication, pgx.Identifier{cfg.Publication}.Sanitize())
	}
	if !slot.Failover && FailoverSlots(ss.conn) {
		ss.enableFailover(ctx, slot.Name)
	}
	return slot, nil
}

// enableFailover turns failover on for an existing slot created without it
// (by a pgimageai before failover slots, or by hand), with the replication
// command ALTER_REPLICATION_SLOT of PostgreSQL 17; see
// https://www.postgresql.org/docs/17/protocol-replication.html#PROTOCOL-REPLICATION-ALTER-REPLICATION-SLOT
// A failure is logged, not fatal: the slot streams as before, it only does
// not survive a failover.
func (ss *session) enableFailover(ctx context.Context, name string) {
	// name is ValidSlotName (checked by Run): lower-case letters, digits and
	// underscores, quoted all the same.
	_, err := ss.conn.Exec(ctx, "ALTER_REPLICATION_SLOT "+pgx.Identifier{name}.Sanitize()+" ( FAILOVER true )").ReadAll()
	if err != nil {
		ss.log.Warn("could not turn failover on for the slot; it streams, but a standby keeps no copy of it", "err", err) // the session's logger names the slot
		return
	}
	ss.log.Info("failover turned on for the slot: standbys with sync_replication_slots = on keep a copy of it")
}

// host names the server of the connection, for messages: the address it is
// connected to, which tells the hosts of a multi-host DSN apart.
func (ss *session) host() string {
	if ss.conn == nil || ss.conn.Conn() == nil {
		return "?"
	}
	return ss.conn.Conn().RemoteAddr().String()
}
