package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/provider"
)

// ErrNoRule reports that the rule asked for is not an enabled rule of the
// group; ErrInvalidRule, that it is invalid (its invalid_rule row says why).
var (
	ErrNoRule      = errors.New("no enabled rule of that name")
	ErrInvalidRule = errors.New("the rule is invalid")
)

// Config is what a reconciliation of a group's rules (pgimageai reconcile)
// needs beside its connections.
type Config struct {
	Registry *provider.Registry // to compile the rules as the bridge does
	Env      provider.Env
	Log      *slog.Logger
	Group    string
	Rule     string // only this rule; "" = every enabled rule of Group
	DryRun   bool
	Page     int // keys per page; 0 = DefaultPage
	// Trusted are the tables whose owners' code the rules may run (run's
	// --trust-tables): the rules compile as the bridge compiles them.
	Trusted []string
}

// Outcome is what reconciling one rule found and did, or why it was not
// reconciled.
type Outcome struct {
	Rule    string
	Report  Report
	Skipped string // why the rule was not reconciled; "" when it was
}

// String says what o found and did; dry says that nothing was changed.
func (o Outcome) String(dry bool) string {
	switch {
	case o.Skipped != "":
		return fmt.Sprintf("rule %s: skipped: %s", o.Rule, o.Skipped)
	case dry:
		r := o.Report
		return fmt.Sprintf("rule %s: %d target rows and %d source rows read; %d results of rows no longer in the source would be removed; %d rows without a result would be queued as a backfill (dry run: nothing changed)",
			o.Rule, r.TargetRows, r.SourceRows, r.Orphans, r.Missing)
	}
	return fmt.Sprintf("rule %s: %s", o.Rule, o.Report)
}

// Rules reconciles the enabled rules of c.Group (or c.Rule alone) on src
// and tgt, which may be one connection. The rules are compiled as the
// bridge compiles them (rules.Compile): the same keys, the same targets.
// It may run while a bridge streams the same rules (see DB).
func Rules(ctx context.Context, src, tgt *pgx.Conn, c Config) ([]Outcome, error) {
	log := c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	set, invalid, err := rules.Compile(ctx, log, c.Registry, c.Env, src, tgt, c.Group, c.Trusted)
	if err != nil {
		return nil, err
	}
	todo := set.All()
	if c.Rule != "" {
		r := set.Named(c.Rule)
		if r == nil {
			for _, ir := range invalid {
				if ir.Name == c.Rule {
					return nil, fmt.Errorf("rule %s: %w: %v (fix it first)", c.Rule, ErrInvalidRule, ir.Err)
				}
			}
			return nil, fmt.Errorf("rule %s: %w in group %s", c.Rule, ErrNoRule, rules.GroupOrDefault(c.Group))
		}
		todo = []*rules.Rule{r}
	}
	var out []Outcome
	for _, r := range todo {
		if r.Switching != nil && r.Switching.Side {
			continue // a new version computed on the side: its rule's switch covers it
		}
		o := Options{DryRun: c.DryRun, Page: c.Page, Orphans: !r.Target.WriteBack, Missing: true}
		rep, err := Run(ctx, NewDB(src, tgt, Of(r, set.ForTarget(r.Target.Name())), nil), o)
		if err != nil {
			return out, fmt.Errorf("reconcile rule %s: %w", r.Name, err)
		}
		out = append(out, Outcome{Rule: r.Name, Report: rep})
	}
	for _, ir := range invalid {
		if c.Rule == "" {
			out = append(out, Outcome{Rule: ir.Name, Skipped: "invalid: " + ir.Err.Error()})
		}
	}
	return out, nil
}
