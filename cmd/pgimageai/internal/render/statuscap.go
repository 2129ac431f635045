package render

import (
	"bytes"
	"fmt"
	"strconv"
	"time"

	"github.com/pgimageai/pgimageai/state"
)

// What status says about failures not recorded: a rule at its cap of open
// errors rows counts them instead of writing them.

// errorCap is a rule with failures its cap kept out of pgimageai.errors.
type errorCap = state.ErrorCap

func writeErrorCapsTable(buf *bytes.Buffer, caps []errorCap) {
	if len(caps) == 0 {
		return
	}
	buf.WriteString("Failures not recorded (the rule was at its cap of open errors rows; see pgimageai.error_counts)\n")
	t := newTable(buf)
	t.row("RULE", "OPEN", "CAP", "NOT RECORDED", "LAST")
	for _, c := range caps {
		maxOpen, last := "none", "-"
		if c.MaxOpen != nil {
			maxOpen = strconv.FormatInt(*c.MaxOpen, 10)
		}
		if c.LastDroppedAt != nil {
			last = UTCTime(*c.LastDroppedAt)
		}
		t.row(c.Rule, strconv.FormatInt(c.Open, 10), maxOpen, strconv.FormatInt(c.Dropped, 10), last)
	}
	t.flush()
	fmt.Fprintln(buf, "(pgimageai retry cannot see these rows; once the cause is fixed, disable and enable the rule to backfill them)")
	buf.WriteByte('\n')
}

// errorCapJSON is a rule in the errors_not_recorded list of
// `pgimageai status --format json`.
type errorCapJSON struct {
	Rule          string     `json:"rule"`
	Open          int64      `json:"open"`
	MaxOpen       *int64     `json:"max_open"` // null: no cap
	NotRecorded   int64      `json:"not_recorded"`
	LastDroppedAt *time.Time `json:"last_not_recorded_at"`
}

func errorCapsDocument(caps []errorCap) []errorCapJSON {
	out := []errorCapJSON{}
	for _, c := range caps {
		j := errorCapJSON{Rule: c.Rule, Open: c.Open, MaxOpen: c.MaxOpen, NotRecorded: c.Dropped}
		if c.LastDroppedAt != nil {
			at := c.LastDroppedAt.UTC()
			j.LastDroppedAt = &at
		}
		out = append(out, j)
	}
	return out
}
