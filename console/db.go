package console

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgimageai/pgimageai/bridge/leader"
	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/internal/pgconnect"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/state"
)

// DBConfig says where the console reads.
type DBConfig struct {
	SourceDSN string // "" = libpq PG* variables
	TargetDSN string // "" = the source
	Group     string // the console's rule group
	Slot      string // its slot
	// AllowRetry opens the source read-write: a retry request is the
	// console's one write. Without it every connection is read-only.
	AllowRetry bool
}

// DB is the Source of a running bridge's databases. It is safe for
// concurrent use.
type DB struct {
	cfg      DBConfig
	src, tgt *pgxpool.Pool // tgt == src when they are one database

	mu     sync.Mutex
	infos  map[string]*ruleInfo
	infoAt time.Time
}

// poolSize bounds each database's connections.
const poolSize = 4

// OpenDB connects to the source and target databases of cfg.
func OpenDB(ctx context.Context, cfg DBConfig) (*DB, error) {
	d := &DB{cfg: cfg}
	var err error
	if d.src, err = openPool(ctx, cfg.SourceDSN, !cfg.AllowRetry); err != nil {
		return nil, fmt.Errorf("source database: %w", err)
	}
	if cfg.TargetDSN == "" || cfg.TargetDSN == cfg.SourceDSN {
		d.tgt = d.src
		return d, nil
	}
	if d.tgt, err = openPool(ctx, cfg.TargetDSN, true); err != nil {
		d.src.Close()
		return nil, fmt.Errorf("target database: %w", err)
	}
	return d, nil
}

// Close closes the connections.
func (d *DB) Close() {
	d.src.Close()
	if d.tgt != d.src {
		d.tgt.Close()
	}
}

func openPool(ctx context.Context, dsn string, readOnly bool) (*pgxpool.Pool, error) {
	cfg, err := pgconnect.ParsePoolConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = poolSize
	Pin(cfg.ConnConfig, readOnly)
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := p.Ping(ctx); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Pin sets what every console connection runs with beside what pgconnect
// pins (search_path pg_catalog, pg_temp; row_security off): a statement
// timeout, and — unless the console may retry — read-only transactions.
func Pin(c *pgx.ConnConfig, readOnly bool) {
	pgconnect.Pin(&c.Config)
	c.RuntimeParams["statement_timeout"] = "15s"
	if readOnly {
		c.RuntimeParams["default_transaction_read_only"] = "on"
	}
	if c.RuntimeParams["application_name"] == "" || c.RuntimeParams["application_name"] == "pgimageai" {
		c.RuntimeParams["application_name"] = "pgimageai console"
	}
}

func (d *DB) onSrc(ctx context.Context, f func(*pgx.Conn) error) error {
	return d.src.AcquireFunc(ctx, func(c *pgxpool.Conn) error { return f(c.Conn()) })
}

func (d *DB) onTgt(ctx context.Context, f func(*pgx.Conn) error) error {
	return d.tgt.AcquireFunc(ctx, func(c *pgxpool.Conn) error { return f(c.Conn()) })
}

// groupSlot is the default slot of a rule group on c's database, as run
// resolves it (replication.ResolveSlotName; a legacy name is recognised by
// its slot, not by a checkpoint of it alone).
func groupSlot(ctx context.Context, c *pgx.Conn, group string) (string, error) {
	return replication.ResolveSlotName(ctx, c, group, rules.DefaultGroup, nil)
}

// Overview reads what the overview page shows: what `pgimageai status`
// reads, through the same state and replication calls.
func (d *DB) Overview(ctx context.Context) (Overview, error) {
	ov := Overview{At: time.Now()}
	var listings []state.RuleListing
	var models []provider.Model
	err := d.onSrc(ctx, func(c *pgx.Conn) error {
		var err error
		if ov.Slot, err = readSlot(ctx, c, d.cfg.Slot); err != nil {
			return err
		}
		if listings, err = state.AllRules(ctx, c); err != nil {
			return err
		}
		if models, err = state.Models(ctx, c); err != nil {
			return err
		}
		groups, err := state.RuleGroups(ctx, c)
		if err != nil {
			return err
		}
		for _, g := range groups {
			v := GroupView{Group: g.Group, Rules: g.Rules, Enabled: g.Enabled, Slot: d.cfg.Slot}
			if g.Group != d.cfg.Group {
				if v.Slot, err = groupSlot(ctx, c, g.Group); err != nil {
					return err
				}
			}
			info, found, err := leader.Owner(ctx, c, v.Slot)
			if err != nil {
				return err
			}
			if found {
				v.Leader = info.String()
			}
			ov.Groups = append(ov.Groups, v)
		}
		return nil
	})
	if err != nil {
		return ov, err
	}
	var lanes []state.LaneRow
	var usage []state.UsageRow
	var spent map[string]state.Spent
	err = d.onTgt(ctx, func(c *pgx.Conn) error {
		invalid, err := state.InvalidDetails(ctx, c)
		if err != nil {
			return err
		}
		for i := range listings {
			listings[i].Invalid = invalid[listings[i].Name]
		}
		if lanes, err = state.Lanes(ctx, c, d.cfg.Slot); err != nil {
			return err
		}
		if ov.Models, err = state.ModelPaces(ctx, c, d.cfg.Slot); err != nil {
			return err
		}
		if ov.Errors, err = state.CountOpenErrors(ctx, c); err != nil {
			return err
		}
		if spent, _, err = state.CountedToday(ctx, c); err != nil {
			return err
		}
		if usage, err = state.RecentUsage(ctx, c, 1); err != nil {
			return err
		}
		if ov.Backfills, err = state.Backfills(ctx, c); err != nil {
			return err
		}
		ov.Switches, err = state.RunningSwitches(ctx, c, "")
		return err
	})
	if err != nil {
		return ov, err
	}
	ov.Budgets = budgets(models, spent, usage)
	for _, l := range listings {
		ov.Rules = append(ov.Rules, d.ruleView(ctx, l, ov.Slot, lanes))
	}
	return ov, nil
}

func readSlot(ctx context.Context, c *pgx.Conn, name string) (SlotView, error) {
	v := SlotView{Name: name, ServerVersion: replication.ServerVersion(c.PgConn())}
	s, found, err := replication.ReadSlot(ctx, c, name)
	if err != nil || !found {
		return v, err
	}
	u, found, err := replication.ReadSlotUsage(ctx, c, name)
	if err != nil || !found {
		return v, err
	}
	v.Found, v.Active, v.WALStatus, v.Retained, v.SafeWALSize = true, u.Active, u.WALStatus, u.RetainedBytes, u.SafeWALSize
	v.ConfirmedLSN, v.AtLSN = s.ConfirmedFlushLSN, u.CurrentLSN
	if u.CurrentLSN > s.ConfirmedFlushLSN {
		v.LagBytes = int64(u.CurrentLSN - s.ConfirmedFlushLSN)
	}
	return v, nil
}

// ruleView is l with its state and lag: its lane's (the rules writing one
// target table apply in one lane), as status computes it.
func (d *DB) ruleView(ctx context.Context, l state.RuleListing, slot SlotView, lanes []state.LaneRow) RuleView {
	v := RuleView{RuleListing: l, State: "valid"}
	switch {
	case !l.Enabled:
		v.State = "disabled"
		return v
	case l.Invalid != "":
		v.State = "invalid"
		return v
	}
	v.LagBytes = slot.LagBytes
	lane := l.TargetTable
	if info, err := d.info(ctx, l.Name); err == nil && info.target != nil {
		lane = info.target.String()
	}
	for _, ln := range lanes {
		if ln.Lane != lane {
			continue
		}
		at := max(ln.LSN, slot.ConfirmedLSN)
		v.LagBytes = 0
		if slot.Found && slot.AtLSN > at {
			v.LagBytes = int64(slot.AtLSN - at)
		}
		// In seconds: the age of the oldest change the lane holds, as its
		// leader stored it; without that, the age of the last commit it
		// applied while WAL is still ahead of it (as status shows it).
		switch {
		case ln.Pending != nil && *ln.Pending == 0:
		case ln.OldestPending != nil:
			v.LagSeconds = max(0, ln.OldestPending.Seconds())
		case v.LagBytes > 0 && ln.Delay != nil:
			v.LagSeconds = ln.Delay.Seconds()
		}
	}
	return v
}

// budgets are the models' spend of the day against their caps, and its cost
// where the model has prices.
func budgets(models []provider.Model, spent map[string]state.Spent, usage []state.UsageRow) []Budget {
	var out []Budget
	for _, m := range models {
		opts, err := provider.ParseOptions(m.Options)
		if err != nil {
			continue // an invalid model is reported with its rules
		}
		c := rules.CapOf(opts)
		s := spent[m.Name]
		b := Budget{Model: m.Name, Calls: s.Calls, Tokens: s.Tokens, MaxCalls: c.Calls, MaxTokens: c.Tokens}
		prices := provider.PricesOf(m)
		for _, u := range usage {
			if u.Model != m.Name {
				continue
			}
			if cost, ok := prices.Cost(float64(u.PromptTokens), float64(u.CompletionTokens)); ok {
				b.Cost += cost
			}
		}
		b.Priced = prices.In > 0
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out
}

// Errors reads the open errors, newest first.
func (d *DB) Errors(ctx context.Context, rule, reason string, limit int) (errs []state.ConsoleError, total int64, err error) {
	err = d.onTgt(ctx, func(c *pgx.Conn) error {
		errs, total, err = state.ConsoleErrors(ctx, c, rule, reason, limit)
		return err
	})
	return errs, total, err
}

// ErrorCounts counts the open errors by rule and reason.
func (d *DB) ErrorCounts(ctx context.Context) (counts []state.ErrorCount, err error) {
	err = d.onTgt(ctx, func(c *pgx.Conn) error {
		counts, err = state.CountOpenErrors(ctx, c)
		return err
	})
	return counts, err
}

// CallsToday returns each rule's calls of the UTC day.
func (d *DB) CallsToday(ctx context.Context) (calls map[string]int64, err error) {
	err = d.onTgt(ctx, func(c *pgx.Conn) error {
		calls, err = state.CallsToday(ctx, c)
		return err
	})
	return calls, err
}

// CountRetryable counts the open errors a retry asks for.
func (d *DB) CountRetryable(ctx context.Context, req RetryRequest) (n int64, err error) {
	err = d.onTgt(ctx, func(c *pgx.Conn) error {
		if req.Key != "" {
			n, err = state.CountRetryableRow(ctx, c, req.Rule, req.Key)
		} else {
			n, err = state.CountRetryable(ctx, c, req.Rule, req.Reason)
		}
		return err
	})
	if dataException(err) {
		return 0, nil // a key that is no JSON object: no error has it
	}
	return n, err
}

// Retry writes the retry request that `pgimageai retry --rule --reason`
// writes (or its one-row form): the bridge reads it from its slot and
// reprocesses the rows.
func (d *DB) Retry(ctx context.Context, req RetryRequest) (lsn replication.LSN, err error) {
	if !d.cfg.AllowRetry {
		return 0, errors.New("the console was not started with retry allowed")
	}
	err = d.onSrc(ctx, func(c *pgx.Conn) error {
		if _, err := replication.ReadSlotHere(ctx, c, d.cfg.Slot); err != nil {
			return fmt.Errorf("slot %s: %w (a retry request written before the slot exists would never reach the bridge)", d.cfg.Slot, err)
		}
		if req.Key != "" {
			lsn, err = state.RequestRetryRow(ctx, c, req.Rule, req.Key)
		} else {
			lsn, err = state.RequestRetry(ctx, c, req.Rule, req.Reason)
		}
		return err
	})
	return lsn, err
}
