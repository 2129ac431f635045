package reconn

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestGetParseErrorHidesDSN(t *testing.T) {
	tests := []struct {
		name string
		dsn  string
	}{
		{"bad port", "postgres://u:sekret@localhost:notaport/db"},
		{"bad sslmode", "postgres://u:sekret@localhost/db?sslmode=sometimes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New("source", tt.dsn, nil)
			_, err := c.Get(context.Background())
			if !errors.Is(err, ErrParse) {
				t.Fatalf("Get: %v, want ErrParse", err)
			}
			if strings.Contains(err.Error(), "sekret") || !strings.Contains(err.Error(), "connect to source") {
				t.Fatalf("Get: %q quotes the DSN or misses the role", err)
			}
			if c.Current() != nil {
				t.Fatal("Current after a failed Get is not nil")
			}
		})
	}
}

func TestGetConnectErrorNamesRole(t *testing.T) {
	// Port 1 on loopback refuses at once.
	c := New("target", "postgres://u@127.0.0.1:1/db?connect_timeout=2", nil)
	configured := false
	c.configure = func(*pgconn.Config) { configured = true }
	_, err := c.Get(context.Background())
	if err == nil || !strings.HasPrefix(err.Error(), "connect to target: ") {
		t.Fatalf("Get: %v, want a connect error naming the target", err)
	}
	if !configured {
		t.Fatal("configure was not called before connecting")
	}
	if err := c.Do(context.Background(), func(*pgx.Conn) error { t.Fatal("f ran without a connection"); return nil }); err == nil {
		t.Fatal("Do without a connection returned nil")
	}
}
