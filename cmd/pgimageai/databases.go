package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgimageai/pgimageai/internal/pgconnect"
	"github.com/pgimageai/pgimageai/internal/pgerr"
)

// database is a connection of a read-side command to the source or the
// target database, named for messages without its password.
type database struct {
	role  string // "source" or "target"
	where string // user@host:port/db
	conn  *pgx.Conn
}

// openDatabase opens the role's database at dsn ("" = libpq PG* variables).
func openDatabase(ctx context.Context, role, dsn string) (*database, error) {
	cfg, err := pgconnect.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: %s dsn: %v", errUsage, role, err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s database %s: %w", role, where(cfg), err)
	}
	return &database{role: role, where: where(cfg), conn: conn}, nil
}

// close closes the connection, even when ctx has ended.
func (d *database) close(ctx context.Context) {
	d.conn.Close(context.WithoutCancel(ctx))
}

// connectBoth opens the source and the target database of c; target is source
// when c names no other target. closeAll closes what was opened.
func connectBoth(ctx context.Context, c config) (source, target *database, closeAll func(), err error) {
	source, err = openDatabase(ctx, "source", c.DSN)
	if err != nil {
		return nil, nil, nil, err
	}
	if c.TargetDSN == "" || c.TargetDSN == c.DSN {
		return source, source, func() { source.close(ctx) }, nil
	}
	target, err = openDatabase(ctx, "target", c.TargetDSN)
	if err != nil {
		source.close(ctx)
		return nil, nil, nil, err
	}
	return source, target, func() { source.close(ctx); target.close(ctx) }, nil
}

// connectTarget opens the target database of c (the source when c names no
// other target).
func connectTarget(ctx context.Context, c config) (*database, error) {
	if c.TargetDSN == "" {
		return openDatabase(ctx, "target", c.DSN)
	}
	return openDatabase(ctx, "target", c.TargetDSN)
}

// explain wraps a failed query on d; a missing pgimageai table says to migrate.
func (d *database) explain(what string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case pgerr.UndefinedTable, pgerr.InvalidSchemaName, pgerr.UndefinedColumn:
			return fmt.Errorf("%s: %s database %s lacks the pgimageai schema or is behind this version (run pgimageai migrate): %w",
				what, d.role, d.where, err)
		}
	}
	return fmt.Errorf("%s: %s database %s: %w", what, d.role, d.where, err)
}
