package main

import (
	"fmt"

	"github.com/pgimageai/pgimageai/internal/pgconnect"
)

// connects names the commands that connect to a database: they need to be
// told which.
var connects = map[string]bool{"migrate": true, "run": true, "status": true, "errors": true, "retry": true,
	"switch": true, "estimate": true, "recover-slot": true, "uninstall": true, "doctor": true}

// libpqTarget are the libpq variables that name a database to connect to
// (https://www.postgresql.org/docs/current/libpq-envars.html).
var libpqTarget = []string{"PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGSERVICE"}

// checkDSN reports, as a usage error, a command that would connect without
// being told where (no --dsn, no PGIMAGEAI_DSN, no libpq variable: it would
// try the local socket as the OS user), and a connection string that cannot
// be parsed.
func (c config) checkDSN(cmd string, getenv func(string) string) error {
	if !connects[cmd] {
		return nil
	}
	if c.DSN == "" {
		told := false
		for _, v := range libpqTarget {
			told = told || getenv(v) != ""
		}
		if !told {
			return fmt.Errorf("%w: no database to connect to: give --dsn, set PGIMAGEAI_DSN, or set the libpq variables (PGHOST, PGPORT, PGDATABASE, PGUSER or PGSERVICE)", errUsage)
		}
	}
	for _, d := range []struct{ flag, dsn string }{{"--dsn", c.DSN}, {"--target-dsn", c.TargetDSN}} {
		if d.dsn == "" {
			continue
		}
		if _, err := pgconnect.ParseConfig(d.dsn); err != nil {
			// pgx's message names the part that is wrong and masks the
			// password.
			return fmt.Errorf("%w: %s cannot be parsed: %v", errUsage, d.flag, err)
		}
	}
	return nil
}
