package rules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/internal/reconn"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/state"
)

// Change is a change of pgimageai.rules or pgimageai.models read from the
// WAL; it is applied to the configuration at its transaction's commit.
type Change struct {
	Models bool // pgimageai.models, else pgimageai.rules
	Ch     *replication.Change
}

// apply applies a committed change of the configuration tables to c.
func (c *config) apply(m *pgtype.Map, cc Change) error {
	ch := cc.Ch
	if ch.Op == replication.Truncate {
		if cc.Models {
			c.models = map[string]provider.Model{}
		} else {
			c.rules = map[string]state.RuleRow{}
		}
		return nil
	}
	if ch.Op == replication.Delete || (ch.Op == replication.Update && ch.Old != nil) {
		// A delete, or an update that renamed the row: the old key goes.
		name, err := replication.TupleReader{M: m, Rel: ch.Relation, T: ch.Old}.Text("name")
		if err != nil {
			return err
		}
		if cc.Models {
			delete(c.models, name)
		} else {
			delete(c.rules, name)
		}
	}
	if ch.Op == replication.Delete {
		return nil
	}
	r := replication.TupleReader{M: m, Rel: ch.Relation, T: ch.New}
	if cc.Models {
		var md provider.Model
		var err error
		for _, f := range []struct {
			col string
			dst *string
		}{{"name", &md.Name}, {"provider", &md.Provider}, {"base_url", &md.BaseURL}, {"model", &md.Model}, {"api_key_env", &md.APIKeyEnv}} {
			if *f.dst, err = r.Text(f.col); err != nil {
				return err
			}
		}
		opts, err := r.Value("options")
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
		if *f.dst, err = r.Text(f.col); err != nil {
			return err
		}
	}
	if rr.Prompt, err = r.TextPtr("prompt"); err != nil {
		return err
	}
	enabled, err := r.Value("enabled")
	if err != nil {
		return err
	}
	rr.Enabled, _ = enabled.(bool)
	if ch.Relation.ColumnIndex("switch") >= 0 { // not in a change written before the column was added
		if rr.Switch, err = r.Text("switch"); err != nil {
			return err
		}
	}
	group, err := r.Text("rule_group")
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

// Live owns the configuration as the engine's WAL position sees it, and
// turns it into rule sets, the publication and the invalid_rule rows. A
// reload returns a Diff that the engine applies (swap the set, stop and
// start backfills); nothing here calls the engine. Live is used by the
// engine's goroutine only, on the engine's connection pair.
type Live struct {
	log     *slog.Logger
	cfg     *config
	comp    *compiler
	pub     string
	conns   *reconn.Pair
	valid   map[string]*Rule  // as last accepted (see Accept)
	invalid map[string]string // rule → why, as last reported
	// misfits holds the rules that a table's new shape, read from the WAL,
	// no longer fits, and why: they are invalid until the next check of
	// invalid rules finds them fixed.
	misfits map[string]string
	// readColumns publishes only the columns rules read (see
	// PublishReadColumns).
	readColumns bool
}

// NewLive returns the Live of publication pub, building providers from reg
// with the keys of env, on conns.
func NewLive(log *slog.Logger, pub string, reg *provider.Registry, env provider.Env, conns *reconn.Pair) *Live {
	return &Live{log: log, pub: pub, conns: conns, valid: map[string]*Rule{}, invalid: map[string]string{},
		comp: &compiler{log: log, reg: reg, env: env, providers: map[string]cachedProvider{}}}
}

// PublishReadColumns makes the publication carry only the columns rules
// read (Publication), before the first Load. PostgreSQL makes a listed
// column a dependency of the publication: while it is listed, the
// application's ALTER TABLE ... DROP COLUMN (2BP01) and ALTER COLUMN ...
// TYPE (0A000) of it fail, so it is an operator's choice, not the default.
func (l *Live) PublishReadColumns() { l.readColumns = true }

// Load reads every model, and the rules of group, from the source.
func (l *Live) Load(ctx context.Context, group string) error {
	src, err := l.conns.Src.Get(ctx)
	if err != nil {
		return err
	}
	l.cfg, err = loadConfig(ctx, src, group)
	return err
}

// Apply applies the committed changes of the configuration tables of one
// transaction, decoded with m; Reload then makes the rules follow.
func (l *Live) Apply(m *pgtype.Map, changes []Change, at replication.LSN) error {
	for _, cc := range changes {
		if err := l.cfg.apply(m, cc); err != nil {
			return fmt.Errorf("configuration change at %s: %w", at, err)
		}
	}
	return nil
}

// Counts returns how many rules are valid and invalid.
func (l *Live) Counts() (valid, invalid int) { return len(l.valid), len(l.invalid) }

// Pending reports whether a switch the engine pushed may not have committed
// yet: the next Recheck reloads (see compiler.Pending).
func (l *Live) Pending() bool { return l.comp.Pending() }

// HasInvalid reports whether some enabled rule is invalid.
func (l *Live) HasInvalid() bool { return len(l.invalid) > 0 }

// Misfit makes rules invalid_rule, at the WAL position where their table
// stopped fitting them (a schema change is a configuration change); the
// next Reload leaves them out, so that the other rules go on.
func (l *Live) Misfit(why map[string]string) {
	if l.misfits == nil {
		l.misfits = map[string]string{}
	}
	for name, reason := range why {
		l.misfits[name] = reason
	}
}

// Recheck prepares a check of the invalid rules against the catalog: the
// misfits are dropped (a table may fit again). restore puts back what the
// check changed, for a check that failed.
func (l *Live) Recheck() (restore func()) {
	before, misfits := l.invalid, l.misfits
	l.misfits = nil
	return func() { l.invalid, l.misfits = before, misfits }
}

// Forget forgets the backfills of the rules of target table lane, whose
// table was dropped and made again (whatever it held is gone), and treats
// them as new, so that the next Reload backfills them from the start. It
// returns their names: their running backfills must stop.
func (l *Live) Forget(ctx context.Context, lane string) ([]string, error) {
	var names []string
	for name, r := range l.valid {
		if r.Target.Name() == lane {
			names = append(names, name)
		}
	}
	tgt, err := l.conns.Tgt.Get(ctx)
	if err != nil {
		return nil, err
	}
	if err := state.ForgetBackfills(ctx, tgt, names...); err != nil {
		return nil, err
	}
	for _, name := range names {
		delete(l.valid, name) // loaded again as new: a backfill from the start
	}
	l.log.Warn("target table was re-created; backfilling its rules", "target", lane, "rules", strings.Join(names, ","))
	return names, nil
}

// SwitchNow makes the next Reload compile rule as switched to version to:
// the engine reached the rule's switch marker and pushes the switch to its
// lane, after which the rule writes its new version into the live column.
//
// to "" takes it back: the rule did not compile as switched.
func (l *Live) SwitchNow(rule, to string) {
	if to == "" {
		delete(l.comp.switching, rule)
		return
	}
	if l.comp.switching == nil {
		l.comp.switching = map[string]string{}
	}
	l.comp.switching[rule] = to
}

// Diff is what a Reload changed: the engine swaps in Set, stops the
// backfills of Stop and starts those of Start, then calls Accept.
type Diff struct {
	Set   *Set
	Stop  []string // rules changed, disabled, deleted or invalid: their backfills end
	Start []*Rule  // rules new, re-enabled or changed: they backfill
	// BatchAPIs are the batch APIs of the models with batch_api, by
	// models.name, also of models no rule uses: what cleans up the batches
	// of given-up backfills (backfill.Cleaner).
	BatchAPIs map[string]provider.BatchAPI
	// Drops is side work given up, whose shadow columns the lanes drop
	// (the engine pushes them once each).
	Drops []Drop
	next  map[string]*Rule
}

// Accept records d as applied: the next Reload compares with its rules.
// A Diff that was not accepted (its apply failed) is made again by the
// next Reload.
func (l *Live) Accept(d Diff) { l.valid = d.next }

// Reload compiles the rules and makes the publication and the invalid_rule
// rows follow them; it returns what changed for the engine. config holds
// the OIDs of pgimageai.rules and pgimageai.models, which the publication
// must keep.
func (l *Live) Reload(ctx context.Context, config []uint32) (Diff, error) {
	src, tgt, err := l.conns.Conns(ctx)
	if err != nil {
		return Diff{}, err
	}
	// The rules of other groups are their bridges' to run, report and
	// switch.
	others, err := state.OtherGroupsRules(ctx, src, l.cfg.group)
	if err != nil {
		return Diff{}, err
	}
	valid, invalid, drops, err := l.comp.compileAll(ctx, l.cfg, others, src, tgt)
	if err != nil {
		return Diff{}, err
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
	if valid, invalid, err = l.publish(ctx, src, valid, invalid, config); err != nil {
		return Diff{}, err
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
	if err := state.ReportInvalidRules(ctx, tgt, rows, others); err != nil {
		return Diff{}, err
	}
	// The batches of rules that stopped while no bridge ran (the stops
	// seen here give theirs up below) are cancelled at the provider too.
	keep := slices.Clone(others)
	for _, r := range valid {
		keep = append(keep, r.Name)
	}
	gone, err := state.GiveUpOrphanBatches(ctx, tgt, keep)
	if err != nil {
		return Diff{}, err
	}
	if len(gone) > 0 {
		l.log.Info("the batches of stopped rules are cancelled at the provider", "rules", strings.Join(gone, ","))
	}

	d := Diff{Set: NewSet(valid), BatchAPIs: l.batchAPIs(), Drops: drops}
	d.next = d.Set.byName
	for name, old := range l.valid {
		r, ok := d.next[name]
		if ok && r.Fingerprint == old.Fingerprint {
			continue
		}
		d.Stop = append(d.Stop, name)
		if !ok && !l.comp.switchedSide(name) {
			// Disabled, deleted or invalid: when it runs again, it
			// backfills again (what changed meanwhile was not streamed).
			if err := state.ForgetBackfills(ctx, tgt, name); err != nil {
				return Diff{}, err
			}
			l.log.Info("rule stopped", "rule", name)
		}
	}
	for _, r := range valid {
		if old, ok := l.valid[r.Name]; ok && old.Fingerprint == r.Fingerprint {
			continue
		}
		l.log.Info("rule loaded", "rule", r.Name, "function", string(r.Fn.Name()), "model", r.Model,
			"source", r.Source.String(), "target", r.Target.Name()+"."+r.Target.Column, "write_back", r.Target.WriteBack)
		d.Start = append(d.Start, r)
	}
	return d, nil
}

// Publication returns what the publication of valid publishes: the
// configuration tables, every column (read live, whatever they hold), and
// each source table of valid — with readColumns, only the columns its rules
// read: its key (the replica identity's columns), image columns and the
// columns prompt templates name, so that a huge value in a column no rule
// reads never reaches the bridge (PostgreSQL 15+; the publication adds the
// identity's columns, see replication.PublishTable).
func Publication(valid []*Rule, readColumns bool) []replication.PublishTable {
	tables := []replication.PublishTable{{Name: pgx.Identifier{"pgimageai", "rules"}}, {Name: pgx.Identifier{"pgimageai", "models"}},
		{Name: pgx.Identifier{"pgimageai", "retry_requests"}}}
	at := map[uint32]int{}
	for _, r := range valid {
		i, ok := at[r.Source.OID]
		if !ok {
			i = len(tables)
			at[r.Source.OID] = i
			tables = append(tables, replication.PublishTable{Name: r.Source.Identifier()})
		}
		if !readColumns {
			continue
		}
		cols := append(slices.Clone(r.Source.Key()), r.ImageColumn)
		if r.Template != nil {
			cols = append(cols, r.Template.Columns()...)
		}
		for _, c := range cols {
			if !slices.Contains(tables[i].Columns, c) {
				tables[i].Columns = append(tables[i].Columns, c)
			}
		}
	}
	return tables
}

// batchAPIs returns the batch APIs of the models with batch_api, by name.
func (l *Live) batchAPIs() map[string]provider.BatchAPI {
	out := map[string]provider.BatchAPI{}
	for name, m := range l.cfg.models {
		p, err := l.comp.provider(name, m)
		if err != nil {
			continue
		}
		if api, ok := p.(provider.BatchAPI); ok && api.BatchEnabled() {
			out[name] = api
		}
	}
	return out
}

// publish makes the publication publish the configuration tables and the
// source tables of the valid rules, and returns the rules again.
//
// A role that may not change the publication (ALTER PUBLICATION needs
// ownership of the publication and of every table it adds — see the docs'
// least-privilege role) gets by when the publication already covers what it
// needs: tables it publishes beyond that are harmless (their changes match no
// rule), and a rule whose table it lacks becomes invalid_rule, saying what the
// owner must run, while the other rules go on. The periodic re-check picks
// such a rule up once the owner has added its table.
func (l *Live) publish(ctx context.Context, src *pgx.Conn, valid []*Rule, invalid []InvalidRule, config []uint32) ([]*Rule, []InvalidRule, error) {
	err := replication.SyncPublicationTables(ctx, src, l.pub, Publication(valid, l.readColumns))
	if err == nil || !errors.Is(err, replication.ErrPrivilege) {
		return valid, invalid, err
	}
	published, found, perr := replication.PublishedTables(ctx, src, l.pub)
	if perr != nil {
		return nil, nil, perr
	}
	for _, oid := range config { // pgimageai.rules and pgimageai.models
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
