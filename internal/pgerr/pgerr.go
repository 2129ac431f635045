// Package pgerr classifies the errors of PostgreSQL connections for the whole
// module: the SQLSTATE of a server error, and whether an error is transient —
// worth retrying on a new connection — or a problem that a retry will not fix.
// Server errors are classified by SQLSTATE class, never by message text.
//
// Layer: toolkit.
package pgerr

import (
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// SQLState returns the SQLSTATE of the server error in err's chain, or "" when
// err carries none.
func SQLState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// transientClasses are the SQLSTATE classes of server errors about the
// server or the connection, not the statement
// (https://www.postgresql.org/docs/current/errcodes-appendix.html).
var transientClasses = map[string]bool{
	"08": true, // connection exception
	"40": true, // transaction rollback: serialization failure, deadlock
	"53": true, // insufficient resources: too many connections, out of memory, disk full
	"57": true, // operator intervention: admin_shutdown, crash_shutdown, cannot_connect_now
	"58": true, // system error: I/O error, errors external to PostgreSQL
	"XX": true, // internal error
}

// Transient reports whether err is worth retrying, on a new connection: a
// server error whose SQLSTATE class is in transientClasses (08, 40, 53, 57,
// 58, XX), or an error of the network below the protocol — a refused, reset
// or timed out connection, a failed name lookup, EOF in mid-message, a
// connection that pgx reports closed or safe to retry. Every other server
// error (syntax, privileges, missing objects, constraint violations) and
// every other error (a context canceled, a value that does not decode) is not
// transient. Transient(nil) is false.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	if code := SQLState(err); code != "" {
		return len(code) == 5 && transientClasses[code[:2]]
	}
	var opErr *net.OpError
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &opErr), errors.As(err, &dnsErr), errors.Is(err, net.ErrClosed),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ETIMEDOUT), errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH):
		return true
	}
	// pgconn's own: a timeout (the connection's deadline, or a
	// context.DeadlineExceeded within pgconn), or a failure before anything
	// was sent (e.g. "conn closed", a failed connect).
	return pgconn.Timeout(err) || pgconn.SafeToRetry(err)
}
