package render

import (
	"bytes"
	"strconv"
	"time"

	"github.com/pgimageai/pgimageai/state"
)

// UsageDays is how many UTC days of usage status shows.
const UsageDays = 7

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

func writeUsageTable(buf *bytes.Buffer, usage []usageRow) {
	if len(usage) == 0 {
		buf.WriteString("Usage (last " + strconv.Itoa(UsageDays) + " days, UTC): none\n")
		return
	}
	buf.WriteString("Usage (last " + strconv.Itoa(UsageDays) + " days, UTC)\n")
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

// BudgetStatus is a model's daily cap and what it spent today (UTC).
type BudgetStatus struct {
	Model               string
	Day                 time.Time
	Calls, Tokens       int64 // spent
	MaxCalls, MaxTokens int64 // 0: no cap
}

func writeBudgetsTable(buf *bytes.Buffer, budgets []BudgetStatus) {
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
