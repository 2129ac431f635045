package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/pgimageai/pgimageai/cmd/pgimageai/internal/demo"
	"github.com/pgimageai/pgimageai/internal/pgerr"
	"github.com/pgimageai/pgimageai/internal/suggest"
	"github.com/pgimageai/pgimageai/replication"
)

// exitCode maps the error a command returned to the exit code: 2 for a usage
// error and for a configuration error — something that the person running it
// fixes in their settings or their database, and that running it again as it
// is will not fix: a password or role the server refuses, a database that does
// not exist, wal_level not logical, a missing privilege, a server too old, a
// slot of that name that is not ours — and 1 for every other (runtime)
// failure: a server that cannot be reached, a connection lost, a crash.
func exitCode(err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errUsage), errors.Is(err, demo.ErrUsage), configurationError(err):
		return exitUsage
	default:
		return exitFailure
	}
}

// configurationSQLStates are the server errors that a setting fixes, see
// https://www.postgresql.org/docs/current/errcodes-appendix.html.
var configurationSQLStates = map[string]bool{
	pgerr.InvalidAuthorizationSpecification: true,
	pgerr.InvalidPassword:                   true,
	pgerr.InvalidCatalogName:                true,
	pgerr.InsufficientPrivilege:             true,
}

func configurationError(err error) bool {
	for _, target := range []error{replication.ErrVersion, replication.ErrWALLevel, replication.ErrPrivilege, replication.ErrSlotMismatch} {
		if errors.Is(err, target) {
			return true
		}
	}
	return configurationSQLStates[pgerr.SQLState(err)]
}

// flagError rewrites an error of the flag package for a person: an unknown
// flag with the nearest one the command has, and where to read its flags.
func flagError(err error, cmd string, fs *flag.FlagSet) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		name = strings.TrimLeft(name, "-")
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		hint := ""
		if c, ok := suggest.Closest(name, names); ok {
			hint = fmt.Sprintf(" (did you mean --%s?)", c)
		}
		return fmt.Sprintf("unknown flag --%s%s; run 'pgimageai help %s' for its flags", name, hint, cmd)
	}
	return fmt.Sprintf("%s; run 'pgimageai help %s' for its flags", msg, cmd)
}
