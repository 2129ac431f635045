package pgerr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func serverErr(code string) error {
	return fmt.Errorf("query: %w", &pgconn.PgError{Severity: "ERROR", Code: code, Message: "m"})
}

func TestSQLState(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"wrapped server error", serverErr("42P01"), "42P01"},
		{"joined", errors.Join(errors.New("x"), serverErr("57P01")), "57P01"},
		{"not a server error", io.EOF, ""},
		{"nil", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SQLState(tt.err); got != tt.want {
				t.Errorf("SQLState(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

func TestTransient(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		// Server errors, by SQLSTATE class
		// (https://www.postgresql.org/docs/current/errcodes-appendix.html).
		{"08006 connection failure", serverErr("08006"), true},
		{"08P01 protocol violation", serverErr("08P01"), true},
		{"40001 serialization failure", serverErr("40001"), true},
		{"40P01 deadlock detected", serverErr("40P01"), true},
		{"53300 too many connections", serverErr("53300"), true},
		{"53100 disk full", serverErr("53100"), true},
		{"57P01 admin shutdown", serverErr("57P01"), true},
		{"57P02 crash shutdown", serverErr("57P02"), true},
		{"57P03 cannot connect now", serverErr("57P03"), true},
		{"57014 query canceled", serverErr("57014"), true},
		{"58000 system error", serverErr("58000"), true},
		{"58030 io error", serverErr("58030"), true},
		{"XX000 internal error", serverErr("XX000"), true},
		{"XX001 data corrupted", serverErr("XX001"), true},
		{"42P01 undefined table", serverErr("42P01"), false},
		{"42703 undefined column", serverErr("42703"), false},
		{"42501 insufficient privilege", serverErr("42501"), false},
		{"23505 unique violation", serverErr("23505"), false},
		{"25006 read only transaction", serverErr("25006"), false},
		{"28P01 invalid password", serverErr("28P01"), false},
		{"3D000 invalid catalog name", serverErr("3D000"), false},
		{"55006 object in use", serverErr("55006"), false},
		{"short code", serverErr("08"), false},
		// Errors below the protocol.
		{"eof", io.EOF, true},
		{"unexpected eof", fmt.Errorf("receive message: %w", io.ErrUnexpectedEOF), true},
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, true},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"broken pipe", fmt.Errorf("write: %w", syscall.EPIPE), true},
		{"dns", &net.DNSError{Err: "no such host", Name: "db", IsNotFound: true}, true},
		{"closed", fmt.Errorf("read: %w", net.ErrClosed), true},
		// Neither.
		{"canceled", context.Canceled, false},
		{"no such file", fmt.Errorf("read cert: %w", os.ErrNotExist), false},
		{"plain", errors.New("table has no column img"), false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Transient(tt.err); got != tt.want {
				t.Errorf("Transient(%v) = %t, want %t", tt.err, got, tt.want)
			}
		})
	}
}
