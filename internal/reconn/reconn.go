// Package reconn holds one PostgreSQL connection that is made again when it
// broke: a server restart, a network cut or a failed statement after which
// the session is not to be trusted. It is the one place where pgimageai
// re-opens a closed connection (the backfill's page reads, the Batch API's
// answers, the stored-input lookups, the configuration's connections, the
// leader lock, the slot metrics).
//
// A Conn is not safe for concurrent use: it belongs to one goroutine at a
// time, like the *pgx.Conn it holds (a pgtype.Map belongs to one goroutine).
//
// Layer: toolkit.
package reconn

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgimageai/pgimageai/internal/pgconnect"
)

// Conn is a connection to one database, made on first use and again after
// it closed or was dropped.
type Conn struct {
	role      string // "source", "target": for errors
	dsn       string
	configure func(*pgconn.Config)
	conn      *pgx.Conn
}

// New returns a Conn to dsn, not yet connected; role names the database in
// errors ("connect to source: …"). configure, when set, adjusts each
// connection's configuration before it connects (a read buffer, say).
func New(role, dsn string, configure func(*pgconn.Config)) *Conn {
	return &Conn{role: role, dsn: dsn, configure: configure}
}

// ErrParse reports a connection string that cannot be parsed. It never
// quotes the parser's message, which may hold a password.
var ErrParse = errors.New("the connection string cannot be parsed")

// Get returns the connection, connecting first when there is none or it
// closed.
func (c *Conn) Get(ctx context.Context) (*pgx.Conn, error) {
	if c.conn != nil && !c.conn.IsClosed() {
		return c.conn, nil
	}
	c.conn = nil
	cfg, err := pgconnect.ParseConfig(c.dsn)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", c.role, ErrParse)
	}
	if c.configure != nil {
		c.configure(&cfg.Config)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", c.role, err)
	}
	c.conn = conn
	return conn, nil
}

// Current returns the connection as it is, nil when none is open; it never
// connects.
func (c *Conn) Current() *pgx.Conn {
	if c.conn == nil || c.conn.IsClosed() {
		return nil
	}
	return c.conn
}

// Drop closes the connection, if any: the next Get makes a fresh session.
// Call it after a failure that may have left the session unusable.
func (c *Conn) Drop(ctx context.Context) {
	if c.conn != nil {
		_ = c.conn.Close(ctx)
		c.conn = nil
	}
}

// Do runs f on the connection, dropping it when f fails, so that the next
// call starts on a fresh session.
func (c *Conn) Do(ctx context.Context, f func(*pgx.Conn) error) error {
	conn, err := c.Get(ctx)
	if err != nil {
		return err
	}
	if err := f(conn); err != nil {
		c.Drop(ctx)
		return err
	}
	return nil
}
