package rules

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/internal/pgerr"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
	"github.com/pgimageai/pgimageai/value"
)

// ByteaOID is the type OID of bytea.
const ByteaOID = 17

// config is the content of pgimageai.rules and pgimageai.models, kept equal
// to the source's as of the WAL position the engine has reached.
type config struct {
	rules  map[string]state.RuleRow // of group only
	models map[string]provider.Model
	group  string // the rule group this bridge streams
}

// Rule is a validated, enabled rule bound to its function, source and target:
// what the user configured (Config) and what the bridge derived from it
// when it compiled the rule. It is immutable once loaded; a configuration
// change makes new Rules.
type Rule struct {
	Config
	Source     *catalog.Table
	Fn         *functions.Function
	Target     *sink.Target
	KeyColumns []sink.KeyColumn
	// Template is set when the prompt names columns of the source row.
	Template *Template
	// Cap is the model's daily cap (shared by every rule of the model).
	Cap DailyCap
	// Switching is set on the two rules of a rule whose new version is
	// computed on the side: the live rule, frozen at the old version, and
	// the side rule; nil otherwise.
	Switching *Switching
	Identity
	ref *work.Rule // what its items carry (see Ref)
}

// Config is what the user configured of a rule (its pgimageai.rules row),
// as the rule runs it: a side rule's name is its own.
type Config struct {
	Name        string
	ImageColumn string
	Model       string // models.name
	Prompt      string
}

// Identity is what the bridge derives of what a rule computes: results,
// failures and backfills are remembered by it.
type Identity struct {
	// ModelKey identifies the model row as loaded (name and a digest of
	// every column): results and permanent failures are remembered per
	// ModelKey, so a changed model asks again.
	ModelKey string
	// Fingerprint identifies what the rule computes (source, image column,
	// function, version, target): a change means a new backfill.
	Fingerprint string
	// Version is the ID of the version the rule computes (VersionOf).
	Version string

	legacy string // the fingerprint of before versions (see Done)
}

// Ref returns what an item of r carries of it (work.Rule): made once per
// compiled rule, or anew for a rule not compiled (a test's).
func (r *Rule) Ref() *work.Rule {
	if r.ref != nil {
		return r.ref
	}
	return r.newRef()
}

func (r *Rule) newRef() *work.Rule {
	w := &work.Rule{Name: r.Name, Model: r.Model, ModelKey: r.ModelKey, Fingerprint: r.Fingerprint, Version: r.Version}
	if r.Fn != nil {
		w.Fn, w.Input = r.Fn.Name(), r.Fn.InputVersion()
	}
	return w
}

// DailyCap caps what a model may spend per UTC day (its max_calls_per_day
// and max_tokens_per_day options); 0 is no cap.
type DailyCap struct {
	Calls, Tokens int64
}

// CapOf returns the daily cap of model options opts (provider.ParseOptions).
// The bridge enforces it, pgimageai status shows it: one reading of the
// options for both.
func CapOf(opts provider.Options) DailyCap {
	return DailyCap{Calls: opts.MaxCallsPerDay, Tokens: opts.MaxTokensPerDay}
}

// Unlimited reports whether c caps nothing.
func (c DailyCap) Unlimited() bool { return c.Calls == 0 && c.Tokens == 0 }

// InvalidRule is an enabled rule that cannot run, and why.
type InvalidRule struct {
	Name        string
	SourceTable string
	Err         error
}

// DefaultGroup is the rule group of a rule that names none, and of a bridge
// run without --group.
const DefaultGroup = "default"

// GroupOrDefault returns g, or DefaultGroup when g is "".
func GroupOrDefault(g string) string {
	if g == "" {
		return DefaultGroup
	}
	return g
}

// loadConfig reads every model, and the rules of group, from the source
// database.
func loadConfig(ctx context.Context, src *pgx.Conn, group string) (*config, error) {
	c := &config{rules: map[string]state.RuleRow{}, models: map[string]provider.Model{}, group: group}
	models, err := state.Models(ctx, src)
	if err != nil {
		return nil, err
	}
	for _, m := range models {
		c.models[m.Name] = m
	}
	rules, err := state.Rules(ctx, src, group, false)
	if err != nil {
		return nil, err
	}
	for _, rr := range rules {
		c.rules[rr.Name] = rr
	}
	return c, nil
}

// compiler turns configuration into Rules. It keeps one provider per model
// row, so that rules sharing a model share its limits, and builds a new one
// only when the model row changed.
type compiler struct {
	log       *slog.Logger
	reg       *provider.Registry
	env       provider.Env
	providers map[string]cachedProvider // by model name, or frozen version
	used      map[string]bool           // the frozen versions' providers this compilation used
	dims      map[string]int            // the dimension of each new version's vectors, as probed
	// switching names the rules whose switch the engine has reached (see
	// Live.SwitchNow), and the version they switch to.
	switching map[string]string
	// trusted names the tables whose triggers, rules and functions a
	// write-back rule may run (the --trust-tables of pgimageai run).
	trusted []string
}

type cachedProvider struct {
	row string // the model row it was built from, as JSON
	p   provider.Provider
	err error
}

// provider returns the provider of model m, kept under key (the model
// row's name, or a frozen version's), building it when m changed.
func (c *compiler) provider(key string, m provider.Model) (provider.Provider, error) {
	row, _ := json.Marshal(m)
	if cp, ok := c.providers[key]; ok && cp.row == string(row) {
		return cp.p, cp.err
	}
	p, err := c.reg.New(m, c.env)
	c.providers[key] = cachedProvider{row: string(row), p: p, err: err}
	return p, err
}

// binding is what one compiled rule runs: its row (whose name and target
// column may be a side rule's), the model row it calls, and the version
// that computes.
type binding struct {
	rr state.RuleRow
	m  provider.Model
	v  Version
	// providerKey keeps the provider of a frozen old version apart from the
	// model row's current one (see frozen); "" is the model row's name.
	providerKey string
}

// compile validates one enabled rule: its model's provider and options, the
// function's arguments and capabilities, the source table and image column,
// and the target table, which it creates or validates.
func (c *compiler) compile(ctx context.Context, b binding, src, tgt *pgx.Conn) (*Rule, error) {
	rr, m := b.rr, b.m
	key := b.providerKey
	if key == "" {
		key = m.Name
	}
	p, err := c.provider(key, m)
	if err != nil {
		return nil, err
	}
	fn, opts, err := bind(p, m, rr.Function, rr.Prompt)
	if err != nil {
		return nil, err
	}
	source, err := catalog.Lookup(ctx, src, rr.SourceTable)
	if err != nil {
		return nil, fmt.Errorf("source table: %w", err)
	}
	if err := checkRowSecurity(ctx, src, "source", source); err != nil {
		return nil, err
	}
	if err := c.checkDomains(ctx, src, "source", source); err != nil {
		return nil, err
	}
	col, ok := source.Column(rr.ImageColumn)
	switch {
	case !ok:
		return nil, fmt.Errorf("source table %s has no column %q (column names are exact case)", source, rr.ImageColumn)
	case col.Underlying != ByteaOID:
		return nil, fmt.Errorf("image column %s.%s is %s, not bytea (nor a domain over bytea)", source, pgx.Identifier{rr.ImageColumn}.Sanitize(), col.Type)
	}
	// The key is the replica identity's: a table whose identity carries none
	// is never published (publishing it would fail the application's own
	// UPDATEs and DELETEs), and the message says what fixes it.
	if why := source.Identity.Problem(source); why != "" {
		return nil, errors.New(why)
	}
	// The prompt is checked before the target is ensured, so that an invalid
	// rule leaves no target table behind.
	var tpl *Template
	if rr.Prompt != nil {
		if tpl, err = ParseTemplate(*rr.Prompt, source); err != nil {
			return nil, err
		}
	}
	target, err := sink.Ensure(ctx, tgt, rr.TargetTable, source, rr.TargetColumn, resultType(fn, m), SameDatabase(src, tgt))
	if err != nil {
		return nil, err
	}
	if target.Altered != "" {
		// Once: the next Ensure finds the types equal.
		c.log.Info("target key widened to follow the source", "rule", rr.Name, "target", target.Name(), "source", source.String(), "statement", target.Altered)
	}
	if target.WriteBack && rr.TargetColumn == rr.ImageColumn {
		return nil, fmt.Errorf("write-back rule would overwrite its own image column %q", rr.ImageColumn)
	}
	if err := c.checkTarget(ctx, tgt, target); err != nil {
		return nil, err
	}
	row, _ := json.Marshal(m)
	sum := sha256.Sum256(row)
	r := &Rule{Config: Config{Name: rr.Name, ImageColumn: rr.ImageColumn, Model: m.Name}, Source: source, Fn: fn, Target: target, Template: tpl,
		Identity: Identity{ModelKey: m.Name + "@" + hex.EncodeToString(sum[:8]), Version: b.v.ID}, Cap: CapOf(opts)}
	if rr.Prompt != nil {
		r.Prompt = *rr.Prompt
	}
	r.KeyColumns = KeyColumnsOf(source)
	r.Fingerprint = fingerprint(source.OID, rr.ImageColumn, rr.Function, b.v.ID, target.Name(), rr.TargetColumn)
	r.legacy = fingerprint(source.OID, rr.ImageColumn, rr.Function, m.Name, r.Prompt, target.Name(), rr.TargetColumn)
	return r, nil
}

// KeyColumnsOf returns the key columns of source's rows as its replica
// identity names them (catalog.Table.Key): the one derivation of a rule's
// key, for targets, source_key, deletes and key moves, backfill pages and
// retries.
func KeyColumnsOf(source *catalog.Table) []sink.KeyColumn {
	var out []sink.KeyColumn
	for _, k := range source.Key() {
		c, _ := source.Column(k)
		out = append(out, sink.KeyColumn{Name: c.Name, TypeOID: c.TypeOID})
	}
	return out
}

// resultType is what function fn of model m writes.
func resultType(fn *functions.Function, m provider.Model) sink.ResultType {
	switch {
	case fn.Name() == functions.Embed:
		return sink.VectorResult
	case structured(m.Options):
		return sink.JSONResult
	}
	return sink.TextResult
}

// fingerprint digests what a rule computes and where it writes.
func fingerprint(source uint32, parts ...string) string {
	fp := sha256.New()
	for _, s := range append([]string{fmt.Sprint(source)}, parts...) {
		fmt.Fprintf(fp, "%d:%s;", len(s), s)
	}
	return hex.EncodeToString(fp.Sum(nil)[:12])
}

// Done reports whether a backfill stored as done with fingerprint fp is
// done for r: its fingerprint, or — stored before versions were recorded —
// the fingerprint of before, of the same model row name and prompt.
func (r *Rule) Done(fp string) bool { return fp == r.Fingerprint || fp == r.legacy && r.legacy != "" }

// bind binds function (its SQL name) with prompt to model m served by p.
func bind(p provider.Provider, m provider.Model, function string, prompt *string) (*functions.Function, provider.Options, error) {
	opts, err := provider.ParseOptions(m.Options)
	if err != nil {
		return nil, opts, fmt.Errorf("model %q: %w", m.Name, err)
	}
	fn, err := functions.Bind(functions.Name(function), m.Name, p, opts, prompt)
	return fn, opts, err
}

// Bind builds model m's provider from reg with the keys of env and binds
// function with prompt to it, as the bridge does when it loads a rule: what
// pgimageai estimate asks of a rule (its capabilities, whether its backfill
// goes through a batch API) gets the bridge's answer.
func Bind(reg *provider.Registry, env provider.Env, m provider.Model, function string, prompt *string) (*functions.Function, error) {
	p, err := reg.New(m, env)
	if err != nil {
		return nil, err
	}
	fn, _, err := bind(p, m, function, prompt)
	return fn, err
}

// SameDatabase reports whether two connections reach the same database.
func SameDatabase(a, b *pgx.Conn) bool {
	ca, cb := a.Config(), b.Config()
	return ca.Host == cb.Host && ca.Port == cb.Port && ca.Database == cb.Database
}

// compileAll compiles every enabled rule, in name order: one Rule each, or
// two while a rule's new version is computed on the side (see versioned).
// Rules whose target tables clash (one target table fed by two source
// tables) are invalid. An error is returned only for transient failures
// (pgerr.Transient, or a closed connection), which are not the rules'
// fault. It also returns the side work given up (Drops), whose shadow
// columns the lanes drop in order.
//
// Lookups go to src; targets are ensured on tgt.
//
// others names the rules of other groups, whose versions and switches are
// their bridges'.
func (c *compiler) compileAll(ctx context.Context, cfg *config, others []string, src, tgt *pgx.Conn) ([]*Rule, []InvalidRule, []Drop, error) {
	vs, err := state.LoadVersions(ctx, tgt)
	if err != nil {
		return nil, nil, nil, err
	}
	names := make([]string, 0, len(cfg.rules))
	for n, rr := range cfg.rules {
		if rr.Enabled {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var valid []*Rule
	var invalid []InvalidRule
	var drops []Drop
	sourceOf := map[string]uint32{} // target table → source table OID
	compiled := map[string]bool{}
	fail := func(name, source string, err error) error {
		if src.IsClosed() || tgt.IsClosed() || pgerr.Transient(err) {
			return fmt.Errorf("rule %s: %w", name, err)
		}
		invalid = append(invalid, InvalidRule{Name: name, SourceTable: source, Err: err})
		return nil
	}
	for _, n := range names {
		rr := cfg.rules[n]
		v := c.versioned(ctx, cfg, rr, vs, src, tgt)
		drops = append(drops, v.drops...)
		if v.err == nil {
			for _, r := range v.rules {
				if oid, ok := sourceOf[r.Target.Name()]; ok && oid != r.Source.OID {
					v.err = fmt.Errorf("target table %s is already fed by another source table; a target row is keyed by one source table's key", r.Target.Name())
				} else {
					sourceOf[r.Target.Name()] = r.Source.OID
				}
			}
		}
		if v.err != nil {
			if err := fail(rr.Name, rr.SourceTable, v.err); err != nil {
				return nil, nil, nil, err
			}
			continue
		}
		compiled[rr.Name] = true
		valid = append(valid, v.rules...)
		if v.sideErr != nil {
			if err := fail(sideName(rr.Name, v.to), rr.SourceTable, v.sideErr); err != nil {
				return nil, nil, nil, err
			}
		}
	}
	// The switches of this group's rules that no longer run (deleted,
	// disabled, invalid) are given up: their side work is dropped. A
	// deleted rule's live version is forgotten: a rule made again under
	// its name starts afresh.
	other := map[string]bool{}
	for _, n := range others {
		other[n] = true
	}
	for name, sw := range vs.Switches {
		_, ours := cfg.rules[name]
		if !compiled[name] && !other[name] && (sw.State != value.SwitchAborted || !ours) {
			drops = append(drops, dropOf(sw, false))
		}
	}
	for name := range vs.Live {
		if _, ours := cfg.rules[name]; !ours && !other[name] {
			if err := state.ForgetRuleVersion(ctx, tgt, name); err != nil {
				return nil, nil, nil, err
			}
		}
	}
	// The providers of models deleted since (and of frozen versions no
	// longer run) are let go (their idle connections close with their
	// transport's idle timeout): a deployment that creates and deletes
	// models does not keep them all.
	for key := range c.providers {
		if _, ok := cfg.models[key]; !ok && !c.used[key] {
			delete(c.providers, key)
		}
	}
	c.used = nil
	for name := range c.switching {
		if !compiled[name] {
			delete(c.switching, name) // the rule went: its switch with it
		}
	}
	for _, r := range valid {
		r.ref = r.newRef() // the rules are new, seen by no other goroutine yet
	}
	return valid, invalid, shaped(c.log, drops), nil
}

// structured reports whether model options ask for structured output
// (response_format), whose answers go to a jsonb column.
func structured(options json.RawMessage) bool {
	var o struct {
		ResponseFormat json.RawMessage `json:"response_format"`
	}
	return json.Unmarshal(options, &o) == nil && len(o.ResponseFormat) > 0 && string(o.ResponseFormat) != "null"
}
