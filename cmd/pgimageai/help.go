package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// about says what each command does, for the top-level usage (the first
// line) and for the command's own help (all of it).
var about = map[string]string{
	"migrate": `apply migrations (source and target database)
Creates or upgrades schema pgimageai: idempotent, versioned, safe to run twice or at once.
Warns when the source cannot stream yet (wal_level, the REPLICATION attribute).`,
	"run": `stream until SIGINT/SIGTERM; graceful: finish, checkpoint, exit 0
Takes the slot's leader lock (another run on the same slot waits as a standby), prepares
the targets, the publication and the slot, backfills new rules and streams changes.`,
	"status": `slot, confirmed LSN, lag in bytes, rules (valid or why not), results by version, switches, backfills, open errors by reason, failures not recorded`,
	"errors": `list open errors, newest first (rule, key, reason, detail)`,
	"retry": `ask the running bridge to reprocess the source rows behind open errors
Writes a retry request that the bridge reads in the WAL, in commit order with the changes
around it; invalid_rule errors are fixed by editing the rule instead.`,
	"switch": `list the running switches of rules to a new version, or force or abort one
A rule whose model changes computes the new version on the side and switches it in one
transaction; --rule R --force switches without waiting for the rows whose new result failed
(left NULL), --rule R --abort drops the side work (the live column keeps its version).`,
	"estimate": `what a rule would cost: calls, tokens and money for its backfill and per 1,000 rows
Reads the image headers of the rule's source table (a sample of a big one) and applies the
model's token rule, with and without normalisation; the rule may be disabled. When the
rule's model changed, says that the change re-computes every row (on the side, or in place).`,
	"reconcile": `compare sources and targets; remove the results of rows that no longer exist, queue the rows without one
Reads each rule's source keys and target rows in bounded key-ordered pages (no table lock, no
long transaction); the rows without a result are queued as a backfill, which the bridge runs at
its next check. Run it after a restore, or after the tables changed while the bridge was stopped.`,
	"recover-slot": `after the slot was invalidated (wal_status lost) or dropped: re-create it and backfill`,
	"demo":         `one command, no setup: throwaway PostgreSQL, sample images, the bridge, the results`,
	"doctor":       `check a database before and while the bridge runs: server, role, slot, publication, rules, models; what to do for each`,
	"uninstall":    `drop the slot and publication (and with --drop-schema the schema), after listing them`,
	"health":       `exit 0 when the metrics endpoint of a running bridge says ready (a container health check)`,
	"console": `a web page: rules with lag, pace and cost; recent images beside their results; errors with thumbnails and retry; switches in progress
Serves the console on --addr (loopback unless told otherwise) until SIGINT/SIGTERM. Every page
but /healthz needs the token held by the variable --console-token-env names (as a Bearer header,
or through the login page's session cookie); retry only with --console-allow-retry.`,
}

// commandOrder is the order of the commands in the usage.
var commandOrder = []string{"migrate", "run", "status", "errors", "retry", "switch", "estimate", "reconcile", "recover-slot", "doctor", "uninstall", "demo", "health", "console"}

// connection are the settings of the commands that read or write the
// bridge's databases.
var connection = []string{"dsn", "target-dsn", "group", "slot", "publication"}

// uses names the settings (global flags) each command takes; every setting
// is read from its environment variable by every command all the same.
var uses = map[string][]string{
	"migrate":      connection,
	"run":          append(append([]string{}, connection...), "metrics-addr", "pprof-addr", "log-format", "byte-budget", "stall-after", "failover-wait", "probe-max", "revalidate-interval", "publish-columns", "key-env-allow", "trust-tables", "console-addr", "console-token-env"),
	"status":       connection,
	"errors":       connection,
	"retry":        connection,
	"switch":       connection,
	"estimate":     append(append([]string{}, connection...), "key-env-allow"),
	"recover-slot": append(append([]string{}, connection...), "log-format"),
	"reconcile":    append(append([]string{}, connection...), "key-env-allow", "trust-tables"),
	"demo":         {"log-format", "byte-budget", "key-env-allow"},
	"health":       {"metrics-addr"},
	"uninstall":    connection,
	"doctor":       append(append([]string{}, connection...), "key-env-allow"),
	"console":      append(append([]string{}, connection...), "log-format", "console-token-env"),
}

// takes reports whether cmd takes setting flag.
func takes(cmd, flag string) bool {
	for _, f := range uses[cmd] {
		if f == flag {
			return true
		}
	}
	return false
}

// usage is the top-level help.
func usage() string {
	var b strings.Builder
	b.WriteString("pgimageai — AI functions over PostgreSQL image columns, live from the WAL\n\n")
	b.WriteString("Usage:\n  pgimageai <command> [flags]\n  pgimageai help <command>\n  pgimageai --version\n\nCommands:\n")
	for _, cmd := range commandOrder {
		first, _, _ := strings.Cut(about[cmd], "\n")
		fmt.Fprintf(&b, "  %-13s %s\n", cmd, first)
	}
	b.WriteString("\nGlobal flags (each also an environment variable; a command lists those it takes):\n")
	var c config
	for _, s := range c.settings() {
		fmt.Fprintf(&b, "  --%-14s %-24s %s\n", s.flag, s.env, s.help)
	}
	b.WriteString("\nExit codes: 0 done, 1 runtime failure, 2 usage or configuration error.\n")
	b.WriteString("Run 'pgimageai help <command>' for what a command does and its flags.\n")
	return b.String()
}

// commandUsage writes the help of cmd: what it does, its own flags, then
// the global flags it takes.
func commandUsage(w io.Writer, cmd string, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: pgimageai %s [flags]\n\n%s\n", cmd, about[cmd])
	if extra := commandHelp[cmd]; extra != "" {
		fmt.Fprint(w, extra)
	}
	var c config
	global := map[string]string{}
	for _, s := range c.settings() {
		global[s.flag] = s.env
	}
	var own, shared strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		name, help := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		line = fmt.Sprintf("%-28s %s", line, help)
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" {
			line += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		if env, ok := global[f.Name]; ok {
			if !strings.Contains(help, env) {
				line += " [" + env + "]"
			}
			shared.WriteString(line + "\n")
		} else {
			own.WriteString(line + "\n")
		}
	})
	if own.Len() > 0 {
		fmt.Fprintf(w, "\nFlags:\n%s", own.String())
	}
	if shared.Len() > 0 {
		fmt.Fprintf(w, "\nGlobal flags:\n%s", shared.String())
	}
}
