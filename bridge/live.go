package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/internal/backoff"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/state"
)

// configChange is a change of pgimageai.rules or pgimageai.models read from
// the WAL; it is applied to the configuration at its transaction's commit.
type configChange struct {
	models bool // pgimageai.models, else pgimageai.rules
	ch     *replication.Change
}

// tupleReader reads columns of a tuple by name.
type tupleReader struct {
	m   *pgtype.Map
	rel *replication.Relation
	t   replication.Tuple
}

func (r tupleReader) value(name string) (any, error) {
	i := r.rel.ColumnIndex(name)
	if i < 0 {
		return nil, fmt.Errorf("%s.%s has no column %q", r.rel.Namespace, r.rel.Name, name)
	}
	return replication.DecodeValue(r.m, r.rel.Columns[i], r.t[i])
}

func (r tupleReader) text(name string) (string, error) {
	v, err := r.value(name)
	if err != nil || v == nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("column %s: %T is not text", name, v)
	}
	return s, nil
}

func (r tupleReader) textPtr(name string) (*string, error) {
	v, err := r.value(name)
	if err != nil || v == nil {
		return nil, err
	}
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("column %s: %T is not text", name, v)
	}
	return &s, nil
}

// apply applies a committed change of the configuration tables to c.
func (c *config) apply(m *pgtype.Map, cc configChange) error {
	ch := cc.ch
	if ch.Op == replication.Truncate {
		if cc.models {
			c.models = map[string]provider.Model{}
		} else {
			c.rules = map[string]state.RuleRow{}
		}
		return nil
	}
	if ch.Op == replication.Delete || (ch.Op == replication.Update && ch.Old != nil) {
		// A delete, or an update that renamed the row: the old key goes.
		name, err := tupleReader{m, ch.Relation, ch.Old}.text("name")
		if err != nil {
			return err
		}
		if cc.models {
			delete(c.models, name)
		} else {
			delete(c.rules, name)
		}
	}
	if ch.Op == replication.Delete {
		return nil
	}
	r := tupleReader{m, ch.Relation, ch.New}
	if cc.models {
		var md provider.Model
		var err error
		for _, f := range []struct {
			col string
			dst *string
		}{{"name", &md.Name}, {"provider", &md.Provider}, {"base_url", &md.BaseURL}, {"model", &md.Model}, {"api_key_env", &md.APIKeyEnv}} {
			if *f.dst, err = r.text(f.col); err != nil {
				return err
			}
		}
		opts, err := r.value("options")
		if err != nil {
			return err
		}
		if md.Options, err = json.Marshal(opts); err != nil {
			return fmt.Errorf("models.options: %w", err)
		}
		c.models[md.Name] = md
		return nil
	}
	var rr state.RuleRow
	var err error
	for _, f := range []struct {
		col string
		dst *string
	}{{"name", &rr.Name}, {"source_table", &rr.SourceTable}, {"image_column", &rr.ImageColumn}, {"function", &rr.Function},
		{"model", &rr.Model}, {"target_table", &rr.TargetTable}, {"target_column", &rr.TargetColumn}} {
		if *f.dst, err = r.text(f.col); err != nil {
			return err
		}
	}
	if rr.Prompt, err = r.textPtr("prompt"); err != nil {
		return err
	}
	enabled, err := r.value("enabled")
	if err != nil {
		return err
	}
	rr.Enabled, _ = enabled.(bool)
	group, err := r.text("rule_group")
	if err != nil {
		return err
	}
	if group != c.group {
		delete(c.rules, rr.Name) // another group's rule (or moved there): not ours
		return nil
	}
	c.rules[rr.Name] = rr
	return nil
}

// liveConfig owns the configuration as the engine's WAL position sees it and
// turns it into the engine's rules, the publication, the invalid_rule rows and
// the backfills. It is used by the engine's goroutine only.
type liveConfig struct {
	log     *slog.Logger
	cfg     *config
	comp    *compiler
	pub     string
	src     *pgx.Conn // lookups, publication and catalog, on the source
	tgt     *pgx.Conn // invalid rules and backfill state, on the target
	srcDSN  string
	tgtDSN  string
	valid   map[string]*Rule
	invalid map[string]string // rule → why, as last reported
	// deferred holds the rules whose backfills wait for the slot: at the
	// first start, rows are read only once the slot's consistent point is
	// fixed, so that every row is either read or streamed.
	deferred  []*Rule
	deferring bool
	// misfits holds the rules that a table's new shape, read from the WAL,
	// no longer fits, and why: they are invalid until the next check of
	// invalid rules finds them fixed.
	misfits map[string]string
}

// misfit makes rules invalid_rule, at the WAL position where their table
// stopped fitting them (SPEC §2, issue 10: a schema change is a
// configuration change), and reloads, so that the other rules go on.
func (l *liveConfig) misfit(ctx context.Context, e *engine, why map[string]string) error {
	if l.misfits == nil {
		l.misfits = map[string]string{}
	}
	for name, reason := range why {
		l.misfits[name] = reason
	}
	return l.retrying(ctx, "invalidating rules after a schema change", func() error { return l.reload(ctx, e) })
}

// rebackfill backfills the rules of lane from the start after its target
// table was dropped and made again (see recreate): whatever it held is gone.
func (l *liveConfig) rebackfill(ctx context.Context, e *engine, lane string) error {
	var names []string
	for name, r := range l.valid {
		if r.Target.Name() == lane {
			names = append(names, name)
		}
	}
	return l.retrying(ctx, "re-creating target "+lane, func() error {
		if err := state.ForgetBackfills(ctx, l.tgt, names...); err != nil {
			return err
		}
		for _, name := range names {
			e.stopBackfill(name)
			delete(l.valid, name) // loaded again as new: a backfill from the start
		}
		l.log.Warn("target table was re-created; backfilling its rules", "target", lane, "rules", names)
		return l.reload(ctx, e)
	})
}

// commit applies the configuration changes of t, a transaction at its
// commit, and reloads the rules. A reload that fails is retried (see
// retrying): no transaction after t is processed under the old rules.
func (l *liveConfig) commit(ctx context.Context, e *engine, t *openTxn) error {
	for _, cc := range t.config {
		if err := l.cfg.apply(e.typeMap, cc); err != nil {
			return fmt.Errorf("configuration change at %s: %w", t.final, err)
		}
	}
	return l.retrying(ctx, fmt.Sprintf("applying the configuration change at %s", t.final), func() error {
		return l.reload(ctx, e)
	})
}

// retrying runs f until it succeeds or ctx ends. f works through l's
// connections; after a failure they are closed, so that the next attempt
// reconnects on fresh sessions (a broken one, or one that began while the
// database was read-only). So a source or target briefly unusable — a
// restart, a network cut, writes refused — delays the stream, whose
// backpressure keeps the walsender alive, instead of stopping the bridge.
// f must be safe to run again.
func (l *liveConfig) retrying(ctx context.Context, what string, f func() error) error {
	bo := backoff.Backoff{Min: 200 * time.Millisecond, Max: 10 * time.Second}
	for attempt := 1; ; attempt++ {
		err := l.reconnect(ctx)
		if err == nil {
			err = f()
		}
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		l.log.Warn(what+" failed; retrying", "attempt", attempt, "err", err)
		l.close(ctx)
		if err := bo.Sleep(ctx); err != nil {
			return err
		}
	}
}

// recheck compiles the rules again when some are invalid and no source
// transaction is open: what made a rule invalid may be gone (a table or
// column created, a target fixed) without any change to the rule rows that
// would trigger a reload.
//
// A failure here (the target or source briefly unreachable) is logged and
// the check repeated next time; it never stops the bridge.
func (e *engine) recheck(ctx context.Context) error {
	if e.open != nil || len(e.live.invalid) == 0 {
		return nil
	}
	before, misfits := e.live.invalid, e.live.misfits
	e.live.misfits = nil // checked again against the catalog
	if err := e.live.reload(ctx, e); err != nil {
		e.live.misfits = misfits
		if ctx.Err() != nil {
			return ctx.Err()
		}
		e.live.invalid = before // so that the next check runs again
		e.live.close(ctx)       // on fresh sessions
		e.log.Warn("checking invalid rules again failed; retrying at the next check", "err", err)
	}
	return nil
}

// reload compiles the rules and makes everything follow them: the engine's
// rule map, the publication, the invalid_rule rows, and the backfills of
// rules that are new, re-enabled or changed.
func (l *liveConfig) reload(ctx context.Context, e *engine) error {
	if err := l.reconnect(ctx); err != nil {
		return err
	}
	valid, invalid, err := l.comp.compileAll(ctx, l.cfg, l.src, l.tgt)
	if err != nil {
		return err
	}
	if len(l.misfits) > 0 {
		kept := valid[:0:0]
		for _, r := range valid {
			if why, ok := l.misfits[r.Name]; ok {
				invalid = append(invalid, InvalidRule{Name: r.Name, SourceTable: r.Source.String(), Err: errors.New(why)})
				continue
			}
			kept = append(kept, r)
		}
		valid = kept
	}
	if valid, invalid, err = l.publish(ctx, valid, invalid, e.config); err != nil {
		return err
	}
	why := map[string]string{}
	rows := make([]state.InvalidRule, 0, len(invalid))
	for _, r := range invalid {
		why[r.Name] = r.Err.Error()
		if l.invalid[r.Name] != why[r.Name] {
			l.log.Error("invalid rule skipped", "rule", r.Name, "source_table", r.SourceTable, "err", r.Err)
		}
		rows = append(rows, state.InvalidRule{Rule: r.Name, SourceTable: r.SourceTable, Detail: why[r.Name]})
	}
	l.invalid = why
	// The rules of other groups are their bridges' to report or resolve.
	others, err := state.OtherGroupsRules(ctx, l.src, l.cfg.group)
	if err != nil {
		return err
	}
	if err := state.ReportInvalidRules(ctx, l.tgt, rows, others); err != nil {
		return err
	}

	set := newRuleSet(valid)
	next := set.byName
	e.swap(set)
	for name, old := range l.valid {
		r, ok := next[name]
		if ok && r.Fingerprint == old.Fingerprint {
			continue
		}
		e.stopBackfill(name)
		if !ok {
			// Disabled, deleted or invalid: when it runs again, it
			// backfills again (what changed meanwhile was not streamed).
			if err := state.ForgetBackfills(ctx, l.tgt, name); err != nil {
				return err
			}
			l.log.Info("rule stopped", "rule", name)
		}
	}
	for name, r := range next {
		if old, ok := l.valid[name]; ok && old.Fingerprint == r.Fingerprint {
			continue
		}
		l.log.Info("rule loaded", "rule", r.Name, "function", string(r.Fn.Name()), "model", r.Model,
			"source", r.Source.String(), "target", r.Target.Name()+"."+r.Target.Column, "write_back", r.Target.WriteBack)
		if l.deferring {
			l.deferred = append(l.deferred, r)
			continue
		}
		if err := e.startBackfill(ctx, r); err != nil {
			return err
		}
	}
	l.valid = next
	return nil
}

// publish makes the publication publish the configuration tables and the
// source tables of the valid rules, and returns the rules again.
//
// A role that may not change the publication (ALTER PUBLICATION needs
// ownership of the publication and of every table it adds — see the README's
// least-privilege role) gets by when the publication already covers what it
// needs: tables it publishes beyond that are harmless (their changes match no
// rule), and a rule whose table it lacks becomes invalid_rule, saying what the
// owner must run, while the other rules go on. The periodic re-check picks
// such a rule up once the owner has added its table.
func (l *liveConfig) publish(ctx context.Context, valid []*Rule, invalid []InvalidRule, config map[uint32]bool) ([]*Rule, []InvalidRule, error) {
	tables := []pgx.Identifier{{"pgimageai", "rules"}, {"pgimageai", "models"}, {"pgimageai", "retry_requests"}}
	seen := map[uint32]bool{}
	for _, r := range valid {
		if !seen[r.Source.OID] {
			seen[r.Source.OID] = true
			tables = append(tables, r.Source.Identifier())
		}
	}
	err := replication.SyncPublication(ctx, l.src, l.pub, tables)
	if err == nil || !errors.Is(err, replication.ErrPrivilege) {
		return valid, invalid, err
	}
	published, found, perr := replication.PublishedTables(ctx, l.src, l.pub)
	if perr != nil {
		return nil, nil, perr
	}
	for oid := range config { // pgimageai.rules and pgimageai.models
		if !found || !published[oid] {
			return nil, nil, err // the configuration itself cannot be read live
		}
	}
	kept := valid[:0:0]
	for _, r := range valid {
		if published[r.Source.OID] {
			kept = append(kept, r)
			continue
		}
		pub := catalog.QuoteIdent(l.pub)
		invalid = append(invalid, InvalidRule{Name: r.Name, SourceTable: r.Source.String(), Err: fmt.Errorf(
			"table %s is not in publication %s, and this role may not add it (ALTER PUBLICATION needs ownership of the publication and of the table); as their owner, run: ALTER PUBLICATION %s ADD TABLE %s",
			r.Source, pub, pub, r.Source)})
	}
	return kept, invalid, nil
}

// reconnect replaces connections that broke (a server restart, a network
// cut) since their last use.
func (l *liveConfig) reconnect(ctx context.Context) error {
	for _, c := range []struct {
		conn **pgx.Conn
		dsn  string
	}{{&l.src, l.srcDSN}, {&l.tgt, l.tgtDSN}} {
		if *c.conn != nil && !(*c.conn).IsClosed() {
			continue
		}
		conn, err := pgx.Connect(ctx, c.dsn)
		if err != nil {
			return fmt.Errorf("reconnect: %w", err)
		}
		*c.conn = conn
	}
	return nil
}

// close closes the connections.
func (l *liveConfig) close(ctx context.Context) {
	for _, c := range []*pgx.Conn{l.src, l.tgt} {
		if c != nil {
			c.Close(ctx)
		}
	}
}

// startDeferred starts the backfills that reload deferred.
func (l *liveConfig) startDeferred(ctx context.Context, e *engine) error {
	l.deferring = false
	for _, r := range l.deferred {
		if l.valid[r.Name] == r {
			if err := e.startBackfill(ctx, r); err != nil {
				return err
			}
		}
	}
	l.deferred = nil
	return nil
}
