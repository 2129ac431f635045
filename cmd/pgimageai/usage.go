package main

import (
	"bytes"
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// usageDays is how many UTC days of usage status shows.
const usageDays = 7

// usageRow is a row of pgimageai.usage: answered calls and their tokens for
// one rule, model and UTC day.
type usageRow struct {
	Rule, Model      string
	Day              time.Time
	Calls            int64
	PromptTokens     int64
	CompletionTokens int64
}

type usageJSON struct {
	Rule             string `json:"rule"`
	Model            string `json:"model"`
	Day              string `json:"day"` // YYYY-MM-DD, UTC
	Calls            int64  `json:"calls"`
	PromptTokens     int64  `json:"prompt_tokens"`
	CompletionTokens int64  `json:"completion_tokens"`
}

func readUsage(ctx context.Context, target *database) ([]usageRow, error) {
	rows, _ := target.conn.Query(ctx, `SELECT rule, model, day, calls, prompt_tokens, completion_tokens FROM pgimageai.usage
WHERE day > (now() AT TIME ZONE 'UTC')::date - $1::int ORDER BY day DESC, rule, model`, usageDays)
	u, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (usageRow, error) {
		var u usageRow
		err := row.Scan(&u.Rule, &u.Model, &u.Day, &u.Calls, &u.PromptTokens, &u.CompletionTokens)
		return u, err
	})
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
