package rules

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
	"github.com/pgimageai/pgimageai/value"
)

// Switching is what the two rules of a switching rule share: the live rule
// (Side false) runs the old version From into the live column; the side
// rule (Side true) computes To into the shadow column of the same target.
type Switching struct {
	Rule         string // the rule's name in pgimageai.rules
	Side         bool
	SideRule     string // the side rule's name
	From, To     string // version IDs
	Live, Shadow string // target columns
	StartedAt    time.Time
}

// Drop is side work given up — the model changed again, an operator
// aborted, the rule stopped: its lane drops the shadow column, in order
// after whatever the side rule wrote, and forgets its rows.
type Drop struct {
	Rule, Side, From, To string
	TargetTable          string
	Live, Shadow         string
	Aborted              bool
	StartedAt            time.Time
}

func dropOf(sw state.SwitchRow, aborted bool) Drop {
	return Drop{Rule: sw.Rule, Side: sw.Side, From: sw.From, To: sw.To, TargetTable: sw.TargetTable, Live: sw.Live, Shadow: sw.Shadow,
		Aborted: aborted, StartedAt: sw.StartedAt}
}

// shaped returns the drops whose side rule and shadow column are named as
// the bridge names them (sideName, sink.ShadowName): a switches row
// written by hand never makes the bridge drop a column of another name.
func shaped(log *slog.Logger, drops []Drop) []Drop {
	var out []Drop
	for _, d := range drops {
		if d.Side != sideName(d.Rule, d.To) || d.Shadow != sink.ShadowName(d.Live, d.To) {
			log.Warn("a switches row names a side rule or shadow column the bridge did not; left alone", "rule", d.Rule, "side", d.Side, "shadow", d.Shadow)
			continue
		}
		out = append(out, d)
	}
	return out
}

// sideName is the name of the side rule computing version to of rule: its
// results, errors rows, backfill and usage carry it.
func sideName(rule, to string) string { return rule + "@" + short(to) }

func short(version string) string { return version[:min(8, len(version))] }

// compiled is what versioned made of one rule row.
type compiled struct {
	rules   []*Rule
	drops   []Drop
	to      string
	err     error // the rule is invalid
	sideErr error // the side rule cannot run yet; the live rule runs
}

// IsVersioned reports whether a change of version of a rule of function
// with rules.switch mode is computed on the side and switched, rather than
// in place: AI_IMAGE_EMBED unless mode is in_place, AI_IMAGE_COMPLETE only
// when it is versioned.
func IsVersioned(function, mode string) bool {
	switch mode {
	case "versioned":
		return true
	case "in_place":
		return false
	}
	return function == string(functions.Embed)
}

// versioned compiles rule row rr against its live version: one rule when
// the version is unchanged, new, or changed in place; the live rule frozen
// at the old version and the side rule of the new one while a versioned
// change is computed; the switched rule once the engine reached the switch.
func (c *compiler) versioned(ctx context.Context, cfg *config, rr state.RuleRow, vs state.Versions, src, tgt *pgx.Conn) (out compiled) {
	m, ok := cfg.models[rr.Model]
	if !ok {
		out.err = fmt.Errorf("model %q does not exist", rr.Model)
		return out
	}
	v, err := VersionOf(m, rr.Function, rr.Prompt)
	if err != nil {
		out.err = err
		return out
	}
	out.to = v.ID
	live, hasLive := vs.Live[rr.Name]
	sw, hasSw := vs.Switches[rr.Name]
	if to, ok := c.switching[rr.Name]; ok {
		row, known := vs.Rows[to]
		if hasLive && live != to && known && hasSw && sw.To == to {
			// The engine pushed the rule's switch to its lane, which has
			// not committed it yet: the rule stays as the switch leaves
			// it, whatever changed since; a change is applied once the
			// switch committed (see Pending).
			r, err := c.switched(ctx, rr, row, sw, src, tgt)
			out.rules, out.err = []*Rule{r}, err
			return out
		}
		delete(c.switching, rr.Name) // committed (or gone)
	}
	old, hasOld := vs.Rows[live]
	if !hasLive || live == v.ID || !IsVersioned(rr.Function, rr.Switch) || !hasOld {
		// The live column takes this version: first run, unchanged, or in
		// place (its rows are computed again over the old ones).
		if hasSw {
			out.drops = append(out.drops, dropOf(sw, false))
		}
		r, err := c.compile(ctx, binding{rr: rr, m: m, v: v}, src, tgt)
		if err != nil {
			out.err = err
			return out
		}
		if err := state.RecordVersion(ctx, tgt, versionRow(v, m), rr.Name, true); err != nil {
			out.err = err
			return out
		}
		out.rules = []*Rule{r}
		return out
	}
	if hasSw && sw.To != v.ID {
		out.drops = append(out.drops, dropOf(sw, false)) // changed again: the earlier side work goes
		hasSw = false
	}
	aborted := hasSw && (sw.State == value.SwitchAborted || sw.Request == value.SwitchAbort)
	if hasSw && sw.Request == value.SwitchAbort && sw.State != value.SwitchAborted {
		if err := state.AbortSwitch(ctx, tgt, rr.Name, v.ID); err != nil {
			out.err = err
			return out
		}
	}
	frozen, err := c.frozen(ctx, rr, old, src, tgt)
	if err != nil {
		out.err = err
		return out
	}
	if aborted {
		if _, left := frozen.Target.Table.Column(sw.Shadow); left {
			// Dropped once the lane reaches it; found again after a crash.
			out.drops = append(out.drops, dropOf(sw, true))
		}
		out.rules = []*Rule{frozen}
		return out
	}
	shadow := sink.ShadowName(rr.TargetColumn, v.ID)
	s := &Switching{Rule: rr.Name, SideRule: sideName(rr.Name, v.ID), From: live, To: v.ID, Live: rr.TargetColumn, Shadow: shadow, StartedAt: sw.StartedAt}
	// The new version's model row as run now: what the switched rule runs.
	if err := state.RecordVersion(ctx, tgt, versionRow(v, m), rr.Name, false); err != nil {
		out.err = err
		return out
	}
	if !hasSw {
		row := state.SwitchRow{Rule: rr.Name, From: live, To: v.ID, Side: s.SideRule, TargetTable: frozen.Target.Name(), Live: rr.TargetColumn, Shadow: shadow}
		if err := state.StartSwitch(ctx, tgt, row); err != nil {
			out.err = err
			return out
		}
		s.StartedAt = time.Now()
		c.log.Info("rule's version changed: computing the new one on the side", "rule", rr.Name, "from", live, "to", v.ID,
			"model", m.Model, "shadow_column", shadow)
	}
	side, err := c.side(ctx, rr, m, v, s, frozen.Target, src, tgt)
	if err != nil {
		out.rules, out.sideErr = []*Rule{frozen}, fmt.Errorf("computing version %s of rule %s on the side: %w", short(v.ID), rr.Name, err)
		frozen.Switching = s
		return out
	}
	frozen.Switching, side.Switching = s, &Switching{}
	*side.Switching = *s
	side.Switching.Side = true
	out.rules = []*Rule{frozen, side}
	return out
}

// switched compiles rr as its switch leaves it: the side rule of version
// row (run with the model row recorded for it), writing the live column
// under its name. The engine swaps it in at the switch's marker; it holds
// until the switch committed.
func (c *compiler) switched(ctx context.Context, rr state.RuleRow, row state.VersionRow, sw state.SwitchRow, src, tgt *pgx.Conn) (*Rule, error) {
	m, v, err := modelOf(row, rr.Function)
	if err != nil {
		return nil, err
	}
	srr := rr
	srr.Name, srr.TargetTable, srr.TargetColumn, srr.Prompt = sw.Side, sw.TargetTable, sw.Shadow, row.Prompt
	side, err := c.compile(ctx, binding{rr: srr, m: m, v: v}, src, tgt)
	if err != nil {
		return nil, err
	}
	r := *side
	r.Name, r.Switching, r.legacy, r.ref = rr.Name, nil, "", nil
	r.Target = side.Target.Renamed(sw.Live)
	r.Fingerprint = fingerprint(side.Source.OID, rr.ImageColumn, rr.Function, v.ID, r.Target.Name(), sw.Live)
	return &r, nil
}

// modelOf returns the model row recorded with version row, and its
// version, which must be row's: a row changed by hand is refused rather
// than run.
func modelOf(row state.VersionRow, function string) (provider.Model, Version, error) {
	var m provider.Model
	if err := json.Unmarshal(row.ModelRow, &m); err != nil {
		return m, Version{}, fmt.Errorf("version %s: model row: %w", short(row.ID), err)
	}
	v, err := VersionOf(m, function, row.Prompt)
	if err != nil {
		return m, v, err
	}
	if v.ID != row.ID {
		return m, v, fmt.Errorf("version %s: its recorded model row is of version %s (pgimageai.versions was changed); delete the rule's row of pgimageai.rule_versions to run its current version in place", short(row.ID), short(v.ID))
	}
	return m, v, nil
}

// Pending reports whether a switch the engine pushed may not have
// committed yet: a reload then sees whether it did, and applies what
// changed meanwhile.
func (c *compiler) Pending() bool { return len(c.switching) > 0 }

// frozen compiles rr at its old version, whose model row is the one last
// run with it (pgimageai.versions.model_row): the live column keeps being
// computed by the old model while the new version is computed on the side.
func (c *compiler) frozen(ctx context.Context, rr state.RuleRow, old state.VersionRow, src, tgt *pgx.Conn) (*Rule, error) {
	m, v, err := modelOf(old, rr.Function)
	if err != nil {
		return nil, fmt.Errorf("rule %s: %w", rr.Name, err)
	}
	frr := rr
	frr.Prompt = old.Prompt
	b := binding{rr: frr, m: m, v: v, providerKey: m.Name + "@" + short(old.ID)}
	if c.used == nil {
		c.used = map[string]bool{}
	}
	c.used[b.providerKey] = true
	return c.compile(ctx, b, src, tgt)
}

// side compiles the side rule computing version v into the shadow column,
// which it first adds with the type the new version writes: for a pgvector
// vector(n) live column, vector(m) with m the new model's dimension, which
// one call with a small generated image tells (probe).
func (c *compiler) side(ctx context.Context, rr state.RuleRow, m provider.Model, v Version, s *Switching, live *sink.Target, src, tgt *pgx.Conn) (*Rule, error) {
	srr := rr
	srr.Name, srr.TargetColumn = s.SideRule, s.Shadow
	if _, ok := live.Table.Column(s.Shadow); !ok {
		typ, err := c.shadowType(ctx, m, v, rr, live)
		if err != nil {
			return nil, err
		}
		if err := sink.AddShadowColumn(ctx, tgt, live.Table, s.Shadow, typ); err != nil {
			return nil, err
		}
	}
	return c.compile(ctx, binding{rr: srr, m: m, v: v}, src, tgt)
}

// shadowType returns the SQL type of the shadow column of a rule of model m
// whose live column is live.
func (c *compiler) shadowType(ctx context.Context, m provider.Model, v Version, rr state.RuleRow, live *sink.Target) (string, error) {
	p, err := c.provider(m.Name, m)
	if err != nil {
		return "", err
	}
	fn, _, err := bind(p, m, rr.Function, rr.Prompt)
	if err != nil {
		return "", err
	}
	switch resultType(fn, m) {
	case sink.TextResult:
		return "text", nil
	case sink.JSONResult:
		return "jsonb", nil
	}
	if !live.Vector {
		return "real[]", nil
	}
	dim, ok := c.dims[v.ID]
	if !ok {
		if dim, err = probe(ctx, fn); err != nil {
			return "", err
		}
		// Once per version: adding the column may fail (a lock not
		// granted) and be tried again without asking again.
		if c.dims == nil {
			c.dims = map[string]int{}
		}
		c.dims[v.ID] = dim
	}
	return sink.ShadowType(live, dim) // the live column's vector type (vector, halfvec) of dim dimensions
}

// probeTimeout bounds the one call that finds a new model's dimension.
const probeTimeout = 2 * time.Minute

// probe asks fn (an embedding) for the vector of a small generated image,
// and returns its length: the dimension of the new version's vectors.
func probe(ctx context.Context, fn *functions.Function) (int, error) {
	img := image.NewRGBA(image.Rect(0, 0, 32, 32))
	for y := range 32 {
		for x := range 32 {
			img.Set(x, y, color.RGBA{R: uint8(8 * x), G: uint8(8 * y), B: 128, A: 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	res, err := fn.Call(ctx, buf.Bytes(), true)
	if err != nil {
		return 0, fmt.Errorf("asking the new model for the dimension of its vectors: %w", err)
	}
	if len(res.Vector) == 0 {
		return 0, fmt.Errorf("the new model answered a probe with no vector")
	}
	return len(res.Vector), nil
}

// versionRow is the pgimageai.versions row of v, run with model row m.
func versionRow(v Version, m provider.Model) state.VersionRow {
	row, _ := json.Marshal(m)
	return state.VersionRow{ID: v.ID, Function: v.Function, Model: m.Name, Provider: v.Provider, BaseURL: v.BaseURL,
		ModelID: v.ModelID, Options: v.Options, Prompt: v.Prompt, ModelRow: row}
}

// switchedSide reports whether name is the side rule of a rule the engine
// is switching: its backfill row is the switch transaction's to move.
func (c *compiler) switchedSide(name string) bool {
	for rule, to := range c.switching {
		if name == sideName(rule, to) {
			return true
		}
	}
	return false
}
