package main

import (
	"bytes"
	"context"
	"strconv"
	"time"

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
