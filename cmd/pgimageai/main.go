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

// Exit codes of SPEC §6.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

const usage = `pgimageai — AI functions over PostgreSQL image columns, live from the WAL

Usage:
  pgimageai <command> [flags]

Commands:
  migrate    apply migrations (source and target database)
  run        stream until SIGINT/SIGTERM; graceful: finish, checkpoint, exit 0
  status     slot, confirmed LSN, lag in bytes, rules (valid or why not), backfills, open errors by reason
             [--format table|json]
  errors     list open errors, newest first
             [--rule NAME] [--reason CODE] [--limit N (default 50, 0 = all)] [--format table|json]
  retry      ask the running bridge to reprocess the source rows behind open errors
  estimate   what a rule would cost: calls, tokens and money for its backfill and per 1,000 rows (--rule)
             [--rule NAME] [--reason CODE]
  recover-slot
             after the slot was invalidated (wal_status lost) or dropped: drop and re-create it,
             delete results of source rows deleted meanwhile, make every rule backfill [--force]
  demo       one command, no setup: throwaway PostgreSQL, sample images, the bridge, the results
  health     exit 0 when the metrics endpoint of a running bridge says ready (a container health
             check) [--probe ready|live|leader]

Settings (flag or environment):
  --dsn           PGIMAGEAI_DSN           source database (default: libpq PG* variables)
  --target-dsn    PGIMAGEAI_TARGET_DSN    target database (default: the source)
  --slot          PGIMAGEAI_SLOT          replication slot (default pgimageai)
  --publication   PGIMAGEAI_PUBLICATION   publication (default pgimageai)
  --metrics-addr  PGIMAGEAI_METRICS_ADDR  Prometheus /metrics, /healthz, /readyz and /livez address
  --log-format    PGIMAGEAI_LOG_FORMAT    text (default) or json
  --byte-budget   PGIMAGEAI_BYTE_BUDGET   image bytes in flight (default 256MiB; units B, kB, MB, GB, KiB, MiB, GiB)

Exit codes: 0 done, 1 runtime failure, 2 usage or configuration error.
Run 'pgimageai <command> --help' for a command's flags.
`

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
	"estimate":     estimate,
	"recover-slot": recoverSlot,
	"demo":         demo,
	"health":       health,
}

// run executes the command line and returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "pgimageai: unknown command %q\n\n%s", args[0], usage)
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
