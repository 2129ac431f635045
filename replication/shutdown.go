package replication

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgimageai/pgimageai/internal/pgconnect"
	"github.com/pgimageai/pgimageai/internal/pgerr"
)

// probeName is the application_name of a probe connection, so that it can be
// told apart in pg_stat_activity and in the server log.
const probeName = "pgimageai shutdown probe"

// probeStopping reports whether the server of the stream is shutting down. It
// opens a plain (not replication) connection with the stream's connection
// settings and closes it again: a server that has begun a shutdown refuses it
// with SQLSTATE 57P03 before authentication. While our replication connection
// streams, the server cannot be starting up, so the refusal means a shutdown.
// Any other outcome — the connection succeeds, another error (too many
// connections, a network error), the timeout — reports false: the stream's
// own connection shows network trouble through its status updates.
//
// Session.emit calls it while the consumer holds the stream up: the stream
// reads nothing then and cannot see the keepalives of a walsender in
// shutdown (see serverStopping), which waits for our flush position without
// end. The probe takes at most max(StatusInterval, 1s), capped at
// ConnectTimeout; it is safe for concurrent use.
func (s *Stream) probeStopping(ctx context.Context) bool {
	pc, err := pgconnect.ParseConn(s.cfg.ConnString)
	if err != nil {
		return false // connect reports it
	}
	delete(pc.RuntimeParams, "replication")
	pc.RuntimeParams["application_name"] = probeName
	pc.ConnectTimeout = min(s.cfg.ConnectTimeout, max(s.cfg.StatusInterval, time.Second))
	ctx, cancel := context.WithTimeout(ctx, pc.ConnectTimeout)
	defer cancel()
	conn, err := pgconn.ConnectConfig(ctx, pc)
	if err != nil {
		return refusedStopping(err)
	}
	_ = conn.Close(ctx)
	return false
}

// refusedStopping reports whether err, a connection attempt's error, is the
// refusal of a server in shutdown (or start-up): SQLSTATE 57P03. It is
// classified by SQLSTATE only, never by message text, which is translated.
func refusedStopping(err error) bool {
	return pgerr.SQLState(err) == pgerr.CannotConnectNow
}
