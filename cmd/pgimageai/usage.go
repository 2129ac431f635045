package main

import (
	"bytes"
	"context"
	"sort"
	"strconv"
	"time"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/state"
)

// usageDays is how many UTC days of usage status shows.
const usageDays = 7

// usageRow is a row of pgimageai.usage: answered calls and their tokens for
// one rule, model and UTC day.
type usageRow = state.UsageRow

type usageJSON struct {
	Rule             string `json:"rule"`
	Model            string `json:"model"`
	Day              string `json:"day"` // YYYY-MM-DD, UTC
	Calls            int64  `json:"calls"`
	PromptTokens     int64  `json:"prompt_tokens"`
	CompletionTokens int64  `json:"completion_tokens"`
}

func readUsage(ctx context.Context, target *database) ([]usageRow, error) {
	u, err := state.RecentUsage(ctx, target.conn, usageDays)
	if err != nil {
		return nil, target.explain("read usage", err)
	}
	return u, nil
}

func writeUsageTable(buf *bytes.Buffer, usage []usageRow) {
	if len(usage) == 0 {
		buf.WriteString("Usage (last " + strconv.Itoa(usageDays) + " days, UTC): none\n")
		return
	}
	buf.WriteString("Usage (last " + strconv.Itoa(usageDays) + " days, UTC)\n")
	t := newTable(buf)
	t.row("DAY", "RULE", "MODEL", "CALLS", "PROMPT_TOKENS", "COMPLETION_TOKENS")
	for _, u := range usage {
		t.row(u.Day.Format(time.DateOnly), u.Rule, u.Model, strconv.FormatInt(u.Calls, 10),
			strconv.FormatInt(u.PromptTokens, 10), strconv.FormatInt(u.CompletionTokens, 10))
	}
	t.flush()
}

func usageDocument(usage []usageRow) []usageJSON {
	out := []usageJSON{}
	for _, u := range usage {
		out = append(out, usageJSON{Rule: u.Rule, Model: u.Model, Day: u.Day.Format(time.DateOnly),
			Calls: u.Calls, PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens})
	}
	return out
}

// budgetStatus is a model's daily cap and what it spent today (UTC).
type budgetStatus struct {
	Model               string
	Day                 time.Time
	Calls, Tokens       int64 // spent
	MaxCalls, MaxTokens int64 // 0: no cap
}

// readBudgets reads the models with a daily cap (source) and what they
// spent today (target).
func readBudgets(ctx context.Context, source, target *database) ([]budgetStatus, error) {
	models, err := state.Models(ctx, source.conn)
	if err != nil {
		return nil, source.explain("read models", err)
	}
	spent, day, err := state.CountedToday(ctx, target.conn) // as the bridge counts: usage and the requests waiting in batches
	if err != nil {
		return nil, target.explain("read usage", err)
	}
	var out []budgetStatus
	for _, m := range models {
		opts, err := provider.ParseOptions(m.Options)
		if err != nil {
			continue // an invalid model is reported with its rules
		}
		c := rules.CapOf(opts)
		if c.Unlimited() {
			continue
		}
		s := spent[m.Name]
		out = append(out, budgetStatus{Model: m.Name, Day: day, Calls: s.Calls, Tokens: s.Tokens,
			MaxCalls: c.Calls, MaxTokens: c.Tokens})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out, nil
}

func writeBudgetsTable(buf *bytes.Buffer, budgets []budgetStatus) {
	if len(budgets) == 0 {
		return
	}
	buf.WriteString("\nBudgets (" + budgets[0].Day.Format(time.DateOnly) + ", UTC)\n")
	t := newTable(buf)
	t.row("MODEL", "CALLS", "TOKENS")
	of := func(used, max int64) string {
		if max == 0 {
			return strconv.FormatInt(used, 10) + " (no cap)"
		}
		return strconv.FormatInt(used, 10) + "/" + strconv.FormatInt(max, 10)
	}
	for _, b := range budgets {
		t.row(b.Model, of(b.Calls, b.MaxCalls), of(b.Tokens, b.MaxTokens))
	}
	t.flush()
}
