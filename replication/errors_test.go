package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func pgErr(code string) error {
	return fmt.Errorf("receive message: %w", &pgconn.PgError{Severity: "FATAL", Code: code, Message: "m"})
}

func TestRetryable(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"admin shutdown (pg_terminate_backend, restart)", pgErr("57P01"), true},
		{"crash shutdown", pgErr("57P02"), true},
		{"starting up", pgErr("57P03"), true},
		{"slot active for another pid", pgErr("55006"), true},
		{"connection failure", pgErr("08006"), true},
		{"too many connections", pgErr("53300"), true},
		{"internal error", pgErr("XX000"), true},
		{"eof", io.ErrUnexpectedEOF, true},
		{"refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, true},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"connect timeout", context.DeadlineExceeded, true},
		{"no replication privilege", pgErr("42501"), false},
		{"slot or publication missing", pgErr("42704"), false},
		{"wal removed", pgErr("58P01"), false},
		{"slot cannot be read", pgErr("55000"), false},
		{"bad password", pgErr("28P01"), false},
		{"no such database", pgErr("3D000"), false},
		{"invalid parameter", pgErr("22023"), false},
		{"invalidated", fmt.Errorf("x: %w", ErrSlotInvalidated), false},
		{"protocol", fmt.Errorf("x: %w", ErrProtocol), false},
		{"config", fmt.Errorf("%w: bad dsn", errConfig), false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := retryable(tt.err); got != tt.want {
				t.Errorf("retryable(%v) = %t, want %t", tt.err, got, tt.want)
			}
		})
	}
}

func TestExplain(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		sentinel error
		advice   string
	}{
		{"privilege", pgErr("42501"), ErrPrivilege, `ALTER ROLE "bridge" REPLICATION`},
		{"auth", pgErr("28000"), ErrPrivilege, "pg_hba.conf"},
		{"wal removed", pgErr("58P01"), ErrSlotInvalidated, "pg_drop_replication_slot"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := explain(tt.err, "bridge")
			if !errors.Is(err, tt.sentinel) || !strings.Contains(err.Error(), tt.advice) {
				t.Errorf("explain = %v; want %v with %q", err, tt.sentinel, tt.advice)
			}
			if retryable(err) {
				t.Error("an explained fatal error must not be retryable")
			}
		})
	}
	other := pgErr("57P01")
	if explain(other, "u") != other {
		t.Error("explain must pass other errors through")
	}
}

func TestSettling(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"slot missing", fmt.Errorf("check: %w", ErrNoSlot), true},
		{"server in recovery", inRecovery("10.0.0.2:5432"), true},
		{"slot invalidated", slotInvalidated("s", "lost WAL"), false},
		{"connection refused", errors.New("dial tcp: connection refused"), false},
		{"privilege", fmt.Errorf("%w: no REPLICATION", ErrPrivilege), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Settling(tt.err); got != tt.want {
				t.Errorf("Settling(%v) = %t, want %t", tt.err, got, tt.want)
			}
			if retryable(tt.err) && tt.want {
				t.Errorf("retryable(%v): a settling state must be bounded by FailoverWait, not retried for ever", tt.err)
			}
		})
	}
}
