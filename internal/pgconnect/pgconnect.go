// Package pgconnect is the one place where pgimageai parses a connection
// string: every connection it opens — the bridge's, every command's, the
// replication stream's — is configured here, so that none can forget the
// session settings that keep the roles of the database from running code
// as the bridge's role.
//
// Each session pins
//
//   - search_path = pg_catalog, pg_temp: an unqualified function, operator,
//     type or table in a statement of ours resolves in pg_catalog, never in
//     a schema another role can create objects in (public on PostgreSQL 14
//     and older, an application's schema), as PostgreSQL's own logical
//     replication subscriber does since CVE-2018-1058. pg_temp holds only
//     what the session itself creates, and PostgreSQL never looks there for
//     functions or operators.
//   - row_security = off: a row-level security policy never runs as the
//     bridge's role; a statement that a policy would apply to fails with
//     SQLSTATE 42501 instead, which the rules report as invalid_rule.
//
// The settings travel in the startup packet, so they hold from the first
// statement on and win over a role's or a database's own settings (ALTER
// ROLE … SET search_path) and over an "options" parameter of the
// connection string. See
// https://www.postgresql.org/docs/current/ddl-schemas.html#DDL-SCHEMAS-PATTERNS
// and https://www.postgresql.org/docs/current/runtime-config-client.html#GUC-ROW-SECURITY
//
// Everything here is safe for concurrent use.
//
// Layer: toolkit.
package pgconnect

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SearchPath is the search_path of every session.
const SearchPath = "pg_catalog, pg_temp"

// Settings are the run-time parameters every session pins, sent in its
// startup packet.
func Settings() map[string]string {
	return map[string]string{"search_path": SearchPath, "row_security": "off"}
}

// Pin sets Settings on cfg, over whatever the connection string said.
func Pin(cfg *pgconn.Config) {
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	for k, v := range Settings() {
		cfg.RuntimeParams[k] = v
	}
}

// ParseConfig parses dsn ("" = the libpq PG* variables) as pgx.ParseConfig
// does and pins Settings.
func ParseConfig(dsn string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	Pin(&cfg.Config)
	return cfg, nil
}

// ParseConn parses dsn for a pgconn connection (the replication protocol)
// and pins Settings.
func ParseConn(dsn string) (*pgconn.Config, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	Pin(cfg)
	return cfg, nil
}

// Connect opens a pgx connection to dsn with Settings pinned.
func Connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cfg, err := ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// ParsePoolConfig parses dsn for a pgxpool.Pool (the console's) and pins
// Settings on every connection of the pool.
func ParsePoolConfig(dsn string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	Pin(&cfg.ConnConfig.Config)
	return cfg, nil
}
