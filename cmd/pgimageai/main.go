// Command pgimageai streams bytea images from PostgreSQL's WAL through AI
// functions into target tables. See README.md and docs/operations.md.
//
// Layer: cmd.
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

	"github.com/pgimageai/pgimageai/internal/suggest"
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
	"estimate":     estimateCommand,
	"recover-slot": recoverSlot,
	"reconcile":    reconcileCommand,
	"demo":         demoCommand,
	"health":       health,
	"uninstall":    uninstall,
	"doctor":       doctorCommand,
	"console":      consoleCommand,
}

// run executes the command line and returns the exit code. Help that was asked
// for goes to stdout with exit 0; every error is written once, to stderr, with
// exit 2 for usage and configuration errors (exitCode) and 1 for the rest.
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
			fmt.Fprintf(stderr, "pgimageai help: %s\n", unknownCommand(args[1]))
			return exitUsage
		}
		args = []string{args[1], "--help"}
	case "-version", "--version", "version":
		fmt.Fprint(stdout, version())
		return exitOK
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "pgimageai: %s\n", unknownCommand(args[0]))
		return exitUsage
	}
	c, err := parseConfig(args[0], args[1:], getenv, stdout)
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
		return exitCode(err)
	}
	return exitOK
}

// unknownCommand says that name is no command, with the nearest one.
func unknownCommand(name string) string {
	return fmt.Sprintf("unknown command %q%s; run 'pgimageai help' for the list of commands", name, suggest.Hint(name, commandOrder))
}
