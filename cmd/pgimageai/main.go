// Command pgimageai streams bytea images from PostgreSQL's WAL through AI
// functions into target tables. See README.md and docs/operations.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes of the command line.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// Every connection names itself in pg_stat_activity unless the DSN or
	// the environment chose a name (libpq's PGAPPNAME, which pgx reads).
	if os.Getenv("PGAPPNAME") == "" {
		os.Setenv("PGAPPNAME", "pgimageai")
	}
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// command is one subcommand.
type command func(ctx context.Context, c config, stdout, stderr io.Writer) error

var commands = map[string]command{
	"migrate":      migrate,
	"run":          runBridge,
	"status":       status,
	"errors":       listErrors,
	"retry":        retry,
	"switch":       switchCommand,
	"estimate":     estimate,
	"recover-slot": recoverSlot,
	"reconcile":    reconcileCommand,
	"demo":         demo,
	"health":       health,
}

// run executes the command line and returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		fmt.Fprint(stdout, usage())
		return exitOK
	case "help":
		if len(args) == 1 {
			fmt.Fprint(stdout, usage())
			return exitOK
		}
		if _, ok := commands[args[1]]; !ok {
			fmt.Fprintf(stderr, "pgimageai: unknown command %q\n\n%s", args[1], usage())
			return exitUsage
		}
		args = []string{args[1], "--help"}
		stderr = stdout // asked for: the help is the output
	case "-version", "--version", "version":
		fmt.Fprint(stdout, version())
		return exitOK
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "pgimageai: unknown command %q\n\n%s", args[0], usage())
		return exitUsage
	}
	c, err := parseConfig(args[0], args[1:], getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err == nil {
		err = c.checkDSN(args[0], getenv)
	}
	if err != nil {
		fmt.Fprintf(stderr, "pgimageai %s: %v\n", args[0], err)
		return exitUsage
	}
	if err := cmd(ctx, c, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "pgimageai %s: %v\n", args[0], err)
		if errors.Is(err, errUsage) {
			return exitUsage
		}
		return exitFailure
	}
	return exitOK
}
