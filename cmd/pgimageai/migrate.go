package main

import (
	"context"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/internal/pgconnect"
	"github.com/pgimageai/pgimageai/migrations"
	"github.com/pgimageai/pgimageai/replication"
)

// migrate applies the migrations to the source database and, when it is a
// different one, to the target database.
func migrate(ctx context.Context, c config, stdout, stderr io.Writer) error {
	dsns := []struct{ role, dsn string }{{"source", c.DSN}}
	if c.TargetDSN != "" && c.TargetDSN != c.DSN {
		dsns = append(dsns, struct{ role, dsn string }{"target", c.TargetDSN})
	}
	for _, d := range dsns {
		cfg, err := pgconnect.ParseConfig(d.dsn)
		if err != nil {
			return fmt.Errorf("%w: %s dsn: %v", errUsage, d.role, err)
		}
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return fmt.Errorf("connect to %s database %s: %w", d.role, where(cfg), err)
		}
		// The source must be able to stream: say so now rather than at
		// pgimageai run (the migration itself needs neither).
		var warn error
		if d.role == "source" {
			warn = replication.Preflight(ctx, conn)
		}
		applied, err := migrations.Apply(ctx, conn)
		conn.Close(context.WithoutCancel(ctx))
		if err != nil {
			return fmt.Errorf("%s database %s: %w", d.role, where(cfg), err)
		}
		fmt.Fprintf(stdout, "%s database %s: %d migration(s) applied %v\n", d.role, where(cfg), len(applied), applied)
		if warn != nil {
			fmt.Fprintf(stderr, "pgimageai migrate: warning: pgimageai run will not stream from the source yet: %v\n", warn)
		}
	}
	return nil
}

// where names a database without its password: user@host:port/db.
func where(cfg *pgx.ConnConfig) string {
	return fmt.Sprintf("%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
}
