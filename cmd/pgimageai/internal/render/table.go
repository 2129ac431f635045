package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"
)

// textTable collects aligned columns: cells are separated by '\t', rows end in
// '\n'. Every cell goes through cell first.
type textTable struct {
	buf *bytes.Buffer
	tw  *tabwriter.Writer
}

// newTable returns a table that writes into buf.
func newTable(buf *bytes.Buffer) *textTable {
	return &textTable{buf: buf, tw: tabwriter.NewWriter(buf, 0, 8, 2, ' ', 0)}
}

// row adds a row of cells, indented by two spaces.
func (t *textTable) row(cells ...string) {
	for i := range cells {
		cells[i] = cellText(cells[i])
	}
	// Writes to a bytes.Buffer cannot fail.
	_, _ = io.WriteString(t.tw, "  "+strings.Join(cells, "\t")+"\n")
}

// flush aligns the rows added so far.
func (t *textTable) flush() { _ = t.tw.Flush() }

// cellText makes s fit one table cell: control characters (a tab or a newline
// would break the alignment; an escape sequence could drive the terminal)
// become spaces.
func cellText(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// truncateText shortens s to at most n characters, marking the cut with "…".
func truncateText(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimRight(string(r[:n-1]), " ") + "…"
}

// byteSize formats n bytes exactly and, from 1 KiB on, readably.
func byteSize(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%d bytes (%.1f %ciB)", n, float64(n)/float64(div), "KMGTPE"[exp])
}

// UTCTime formats t for a table: UTC, to the second.
func UTCTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// yesNo formats a boolean for a table.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// JSON writes v as one indented JSON document.
func JSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
