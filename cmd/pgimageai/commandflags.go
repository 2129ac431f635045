package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/pgimageai/pgimageai/cmd/pgimageai/internal/render"
	"github.com/pgimageai/pgimageai/console"
	"github.com/pgimageai/pgimageai/functions"
)

// queryFlags are the flags of the read-side commands (status, errors, retry, switch, …),
// beyond the shared settings. Commands without them leave the zero value.
type queryFlags struct {
	Format string           // table or json (status, errors)
	Rule   string           // only this rule; "" = all (errors, retry)
	Reason functions.Reason // only this reason; "" = all (errors, retry)
	Limit  int              // rows to list, 0 = all (errors)
	Force  bool             // recover a slot that can still stream (recover-slot); force the switch (switch)
	Abort  bool             // abort the switch (switch)
	Probe  string           // ready, live or leader (health)
	// DropSchema drops schema pgimageai too (uninstall).
	DropSchema bool
	// Yes confirms what uninstall lists; without it nothing is dropped.
	Yes  bool
	Addr string // where to listen (console)
	// AllowRetry lets the console ask for retries (console, run).
	AllowRetry bool
	DryRun     bool // say what would be done, change nothing (reconcile)
}

// Output formats of --format.
const (
	formatTable = render.FormatTable
	formatJSON  = render.FormatJSON
)

// defaultLimit is the number of errors that `pgimageai errors` lists by default.
const defaultLimit = 50

// reasons are the reason codes of the function semantics that --reason accepts.
var reasons = []functions.Reason{
	functions.EmptyImage, functions.UnknownFormat, functions.TooLarge, functions.UnsupportedFormat,
	functions.ProviderError, functions.BadResponse, functions.BudgetExhausted, functions.InvalidRule, functions.TargetRefused,
}

// defineCommandFlags defines on fs the flags that cmd has beyond the shared
// settings, bound to q, and returns the check to run once they are parsed.
func defineCommandFlags(cmd string, fs *flag.FlagSet, q *queryFlags) (check func() error) {
	format := func() {
		fs.StringVar(&q.Format, "format", formatTable, "output format: table (for people) or json (one document, for scripts)")
	}
	filters := func(reasonDefault string) {
		fs.StringVar(&q.Rule, "rule", "", "only the errors of this `rule` (default: all rules)")
		fs.Func("reason", "only the errors with this reason `code` (default: "+reasonDefault+"): "+reasonList(), func(s string) error {
			q.Reason = functions.Reason(s)
			return nil
		})
	}
	switch cmd {
	case "status", "doctor":
		format()
		return q.checkFormat
	case "console":
		fs.StringVar(&q.Addr, "addr", console.DefaultAddr, "`address` to listen on; a non-loopback address serves the console to the network (put TLS in front)")
		fs.BoolVar(&q.AllowRetry, "console-allow-retry", false, "let the errors page ask for retries (POST with a CSRF token); without it the console only reads")
		return func() error {
			if q.Addr == "" {
				return fmt.Errorf("--addr must name an address, e.g. %s", console.DefaultAddr)
			}
			return nil
		}
	case "run":
		fs.BoolVar(&q.AllowRetry, "console-allow-retry", false, "let the console of run ask for retries (POST with a CSRF token); without it the console only reads")
		return func() error { return nil }
	case "errors":
		format()
		filters("all")
		fs.IntVar(&q.Limit, "limit", defaultLimit, "list at most this many errors, newest first; 0 = all")
		return func() error {
			if q.Limit < 0 {
				return fmt.Errorf("--limit must be 0 (all) or more, got %d", q.Limit)
			}
			if err := q.checkReason(); err != nil {
				return err
			}
			return q.checkFormat()
		}
	case "recover-slot":
		fs.BoolVar(&q.Force, "force", false, "recover the slot even though it can still stream (every rule backfills again)")
		return func() error { return nil }
	case "health":
		fs.StringVar(&q.Probe, "probe", "ready", "what to check: ready (/readyz), live (/livez) or leader (/healthz)")
		return func() error {
			if _, ok := probes[q.Probe]; !ok {
				return fmt.Errorf("--probe must be ready, live or leader, got %q", q.Probe)
			}
			return nil
		}
	case "retry":
		filters("all but invalid_rule")
		return func() error {
			if q.Reason == functions.InvalidRule {
				return fmt.Errorf("--reason %s: an invalid rule is fixed by editing it in pgimageai.rules, not retried", functions.InvalidRule)
			}
			return q.checkReason()
		}
	case "switch":
		fs.StringVar(&q.Rule, "rule", "", "the `rule` whose switch to force or abort; without --force or --abort, list its switch only (default: all)")
		fs.BoolVar(&q.Force, "force", false, "switch without waiting for the rows whose new result failed: they are left NULL (needs --rule)")
		fs.BoolVar(&q.Abort, "abort", false, "abort the switch: the shadow column and the side work are dropped, the live column keeps its version (needs --rule)")
		format()
		return func() error {
			switch {
			case q.Force && q.Abort:
				return fmt.Errorf("--force and --abort: give one of them")
			case q.Force && q.Rule == "":
				return fmt.Errorf("--force needs --rule: the rule whose switch to force")
			case q.Abort && q.Rule == "":
				return fmt.Errorf("--abort needs --rule: the rule whose switch to abort")
			case (q.Force || q.Abort) && q.Format != formatTable:
				return fmt.Errorf("--format is for the list of switches; --force and --abort print one line")
			}
			return q.checkFormat()
		}
	case "uninstall":
		fs.BoolVar(&q.DropSchema, "drop-schema", false, "also drop every rule group's slot and publication, and schema pgimageai (rules, models, results, errors) on the source and the target")
		fs.BoolVar(&q.Yes, "yes", false, "drop what is listed; without it, only list")
		return func() error { return nil }
	case "reconcile":
		fs.StringVar(&q.Rule, "rule", "", "only this `rule` (default: every enabled rule of the group)")
		fs.BoolVar(&q.DryRun, "dry-run", false, "say what would be removed and queued, change nothing")
		return func() error { return nil }
	case "estimate":
		fs.StringVar(&q.Rule, "rule", "", "the `rule` to estimate (required; it may be disabled)")
		format()
		return func() error {
			if q.Rule == "" {
				return fmt.Errorf("--rule is required")
			}
			return q.checkFormat()
		}
	}
	return func() error { return nil }
}

func (q *queryFlags) checkFormat() error {
	if q.Format != formatTable && q.Format != formatJSON {
		return fmt.Errorf("--format must be %s or %s, got %q", formatTable, formatJSON, q.Format)
	}
	return nil
}

// checkReason rejects a reason code that no errors row can have, so that a
// typo is not mistaken for "no such errors".
func (q *queryFlags) checkReason() error {
	if q.Reason == "" {
		return nil
	}
	for _, r := range reasons {
		if q.Reason == r {
			return nil
		}
	}
	return fmt.Errorf("--reason must be one of %s, got %q", reasonList(), q.Reason)
}

func reasonList() string {
	s := make([]string, len(reasons))
	for i, r := range reasons {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}
