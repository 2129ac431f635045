package rules

import (
	"context"
	"log/slog"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/state"
)

// All returns the set's rules, in name order.
func (s *Set) All() []*Rule {
	out := make([]*Rule, 0, len(s.byName))
	for _, r := range s.byName {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Compile compiles the enabled rules of group as the bridge does when it
// loads them — the same source lookups, keys, target checks (a missing
// target table or column is created) — without touching the publication
// or the invalid_rule rows: what a command that works on the rules'
// tables (pgimageai reconcile) needs of them. Lookups go to src, targets
// are ensured on tgt.
func Compile(ctx context.Context, log *slog.Logger, reg *provider.Registry, env provider.Env, src, tgt *pgx.Conn, group string, trusted []string) (*Set, []InvalidRule, error) {
	cfg, err := loadConfig(ctx, src, GroupOrDefault(group))
	if err != nil {
		return nil, nil, err
	}
	others, err := state.OtherGroupsRules(ctx, src, cfg.group)
	if err != nil {
		return nil, nil, err
	}
	c := &compiler{log: log, reg: reg, env: env, providers: map[string]cachedProvider{}, trusted: trusted}
	valid, invalid, _, err := c.compileAll(ctx, cfg, others, src, tgt)
	if err != nil {
		return nil, nil, err
	}
	return NewSet(valid), invalid, nil
}
