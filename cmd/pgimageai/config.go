package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/pgimageai/pgimageai/bridge"
	"github.com/pgimageai/pgimageai/console"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/replication"
)

// config holds the settings of the command line, each from a flag or, failing that, its
// environment variable, grouped by what they set (the groups are embedded: c.DSN, c.ByteBudget).
type config struct {
	streamSettings
	serveSettings
	bridgeSettings
	Query   queryFlags      // flags of status, errors and retry (commandflags.go)
	Console consoleSettings // of console and run --console-addr (console.go)
	given   givenSettings   // the values as given, before parsing
}

// streamSettings say which databases and which stream: the source, the
// target, the rule group and its slot and publication.
type streamSettings struct {
	DSN         string
	TargetDSN   string
	Group       string
	Slot        string
	Publication string
	slotDefault bool // no --slot or PGIMAGEAI_SLOT: resolveSlot decides
}

// serveSettings are what run serves beside the stream, and its logs.
type serveSettings struct {
	MetricsAddr string
	PprofAddr   string // loopback only; "" = off
	LogFormat   string
}

// bridgeSettings are the bridge's bounds and timings, parsed.
type bridgeSettings struct {
	ByteBudget   int64
	StallAfter   time.Duration          // a lane holding changes this long without a write is stalled; <0 = never
	FailoverWait time.Duration          // how long run waits for a failover of the source to settle
	Revalidate   time.Duration          // how often run reads the followed tables' replica identities again
	ReadColumns  bool                   // publish only the columns rules read (--publish-columns read)
	ProbeMax     time.Duration          // the longest wait between two probes of a model that is down
	KeyEnv       *provider.KeyEnvPolicy // which variables api_key_env may name
}

// givenSettings are the flags and variables that parseConfig parses, as given.
type givenSettings struct {
	byteBudget   string
	stallAfter   string
	failoverWait string
	revalidate   string
	publishCols  string
	probeMax     string
	keyEnvAllow  string
	trustTables  string
}

// trustedTables returns the tables of --trust-tables.
func (c config) trustedTables() []string {
	var out []string
	for _, t := range strings.Split(c.given.trustTables, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// validGroup is what a rule group's name may be (also checked by the
// rules_group_name constraint): it becomes part of a slot's name.
var validGroup = regexp.MustCompile(`^[a-z0-9_]{1,40}$`)

// groupName is the default publication name of a rule group. Publications
// belong to a database, so the name need not carry it (slots do: see
// resolveSlot).
func groupName(group string) string {
	return replication.LegacySlotName(group, bridge.DefaultGroup)
}

// errUsage marks errors that exit with code 2.
var errUsage = errors.New("usage")

// setting is one flag and the environment variable behind it.
type setting struct {
	flag, env, def, help string
	dst                  *string
}

func (c *config) settings() []setting {
	return []setting{
		{"dsn", "PGIMAGEAI_DSN", "", "source database connection string (default: libpq PG* variables)", &c.DSN},
		{"target-dsn", "PGIMAGEAI_TARGET_DSN", "", "target database connection string (default: the source)", &c.TargetDSN},
		{"group", "PGIMAGEAI_GROUP", bridge.DefaultGroup, "rule group to stream (pgimageai.rules.rule_group); each group runs on its own slot, publication and leader lock", &c.Group},
		{"slot", "PGIMAGEAI_SLOT", "", "logical replication slot name (default: pgimageai_DATABASE_HASH, or pgimageai_DATABASE_GROUP_HASH for another group; an existing pgimageai or pgimageai_GROUP slot of this database is kept)", &c.Slot},
		{"publication", "PGIMAGEAI_PUBLICATION", "", "publication name (default: pgimageai, or pgimageai_GROUP for another group)", &c.Publication},
		{"metrics-addr", "PGIMAGEAI_METRICS_ADDR", "", "address for Prometheus /metrics and /healthz, e.g. :9187 (default: off)", &c.MetricsAddr},
		{"pprof-addr", "PGIMAGEAI_PPROF_ADDR", "", "loopback address for Go's /debug/pprof/ profiles, e.g. 127.0.0.1:6060 (default: off; never another host)", &c.PprofAddr},
		{"log-format", "PGIMAGEAI_LOG_FORMAT", "text", "log format: text or json", &c.LogFormat},
		{"byte-budget", "PGIMAGEAI_BYTE_BUDGET", "256MiB", "image bytes in flight before reading pauses: bytes or a size with a unit (256MiB, 1GiB, 500MB)", &c.given.byteBudget},
		{"stall-after", "PGIMAGEAI_STALL_AFTER", "10m", "how long a lane may hold changes without writing before /healthz says stalled (0 = never)", &c.given.stallAfter},
		{"failover-wait", "PGIMAGEAI_FAILOVER_WAIT", "5m", "how long run waits while a failover of the source settles (the server a standby, the slot not there yet) before it stops", &c.given.failoverWait},
		{"console-addr", "PGIMAGEAI_CONSOLE_ADDR", "", "address for the web console beside the bridge, e.g. 127.0.0.1:8080 (default: off; see pgimageai console)", &c.Console.Addr},
		{"console-token-env", "PGIMAGEAI_CONSOLE_TOKEN_ENV", console.DefaultTokenEnv, "the environment variable that holds the console's token (never the token itself)", &c.Console.TokenEnv},
		{"revalidate-interval", "PGIMAGEAI_REVALIDATE_INTERVAL", "5s", "how often the followed tables' replica identities are read again; a table whose identity no longer carries a key leaves the publication within it", &c.given.revalidate},
		{"publish-columns", "PGIMAGEAI_PUBLISH_COLUMNS", "all", "which columns of source tables the publication carries: all, or read (only those rules read: keys, image and prompt template columns; PostgreSQL 15+; the application cannot drop or retype a listed column)", &c.given.publishCols},
		{"trust-tables", "PGIMAGEAI_TRUST_TABLES", "", "tables whose owners' code (a write-back table's triggers, rules and functions; the functions of its columns' domains) the bridge may run as its role: comma-separated, e.g. public.photos (default: none; a rule on such a table is an invalid_rule)", &c.given.trustTables},
		{"probe-max", "PGIMAGEAI_PROBE_MAX", "30s", "the longest wait between two probes of a model that is down (from 1s, doubled after each failed probe)", &c.given.probeMax},
		{"key-env-allow", "PGIMAGEAI_KEY_ENV_ALLOW", "", "environment variables that models' api_key_env may name: comma-separated names or globs, e.g. OPENAI_API_KEY,*_API_KEY (default: any; PG* never)", &c.given.keyEnvAllow},
	}
}

// parseConfig parses args (after the subcommand) with getenv as the fallback
// for unset flags. The command's help, when asked for (-h, --help), is written
// to stdout and flag.ErrHelp returned; a parse error is returned, not written
// (the caller writes it once).
func parseConfig(cmd string, args []string, getenv func(string) string, stdout io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("pgimageai "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, s := range c.settings() {
		if takes(cmd, s.flag) {
			fs.StringVar(s.dst, s.flag, "", fmt.Sprintf("%s (env %s)", s.help, s.env))
		}
	}
	check := defineCommandFlags(cmd, fs, &c.Query)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			commandUsage(stdout, cmd, fs)
			return c, err
		}
		return c, fmt.Errorf("%w: %s", errUsage, flagError(err, cmd, fs))
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	for _, s := range c.settings() {
		if *s.dst == "" {
			*s.dst = getenv(s.env)
		}
		if *s.dst == "" {
			*s.dst = s.def
		}
	}
	if !validGroup.MatchString(c.Group) {
		return c, fmt.Errorf("%w: --group must be 1 to 40 of a-z, 0-9 and _, got %q", errUsage, c.Group)
	}
	if c.Slot == "" {
		// The default carries the database, which only the database can
		// say for sure: resolveSlot sets it for the commands that use it.
		c.Slot, c.slotDefault = replication.LegacySlotName(c.Group, bridge.DefaultGroup), true
	}
	if c.Publication == "" {
		c.Publication = groupName(c.Group)
	}
	n, err := parseSize(c.given.byteBudget)
	if err != nil {
		return c, fmt.Errorf("%w: --byte-budget: %v", errUsage, err)
	}
	if n < 1<<20 {
		return c, fmt.Errorf("%w: --byte-budget must be at least 1MiB (1048576 bytes), got %q", errUsage, c.given.byteBudget)
	}
	c.ByteBudget = n
	if c.StallAfter, err = time.ParseDuration(c.given.stallAfter); err != nil || c.StallAfter < 0 {
		return c, fmt.Errorf("%w: --stall-after must be a duration such as 10m, or 0 for never, got %q", errUsage, c.given.stallAfter)
	}
	if c.StallAfter == 0 {
		c.StallAfter = -1 // never
	}
	if c.FailoverWait, err = time.ParseDuration(c.given.failoverWait); err != nil || c.FailoverWait <= 0 {
		return c, fmt.Errorf("%w: --failover-wait must be a positive duration such as 5m, got %q", errUsage, c.given.failoverWait)
	}
	if c.Revalidate, err = time.ParseDuration(c.given.revalidate); err != nil || c.Revalidate < 100*time.Millisecond || c.Revalidate > time.Hour {
		return c, fmt.Errorf("%w: --revalidate-interval must be a duration from 100ms to 1h such as 5s, got %q", errUsage, c.given.revalidate)
	}
	switch c.given.publishCols {
	case "all":
	case "read":
		c.ReadColumns = true
	default:
		return c, fmt.Errorf("%w: --publish-columns must be all or read, got %q", errUsage, c.given.publishCols)
	}
	if c.ProbeMax, err = time.ParseDuration(c.given.probeMax); err != nil || c.ProbeMax < time.Second {
		return c, fmt.Errorf("%w: --probe-max must be a duration of at least 1s such as 30s, got %q", errUsage, c.given.probeMax)
	}
	if err := checkLoopback(c.PprofAddr); err != nil {
		return c, fmt.Errorf("%w: --pprof-addr: %v", errUsage, err)
	}
	if c.KeyEnv, err = provider.ParseKeyEnvPolicy(c.given.keyEnvAllow); err != nil {
		return c, fmt.Errorf("%w: --key-env-allow: %v", errUsage, err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return c, fmt.Errorf("%w: --log-format must be text or json, got %q", errUsage, c.LogFormat)
	}
	if err := check(); err != nil {
		return c, fmt.Errorf("%w: %v", errUsage, err)
	}
	if takes(cmd, "console-token-env") {
		c.Console.token = getenv(c.Console.TokenEnv)
	}
	return c, nil
}

// logger returns the structured logger the config asks for.
func (c config) logger(w io.Writer) *slog.Logger {
	if strings.EqualFold(c.LogFormat, "json") {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	return slog.New(slog.NewTextHandler(w, nil))
}
