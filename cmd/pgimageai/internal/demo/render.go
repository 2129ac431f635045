package demo

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/state"
)

// resultRow is one source row with its results; nil fields are SQL NULL.
type resultRow struct {
	ID        int
	Name      string
	Img       []byte
	Caption   *string
	Embedding []float32
}

// errorRow is one open row of pgimageai.errors.
type errorRow struct {
	Rule       string
	ID         string // source_key->>'id'
	Reason     string
	ImageBytes *int32
	Detail     string
}

// errorRows are the open errors as the errors table shows them: by the
// source row's id (errors of no row first), then by rule.
func errorRows(open []state.OpenError) []errorRow {
	out := make([]errorRow, len(open))
	ids := make([]*int, len(open))
	for i, e := range open {
		out[i] = errorRow{Rule: e.Rule, ID: string(e.SourceKey), Reason: string(e.Reason), ImageBytes: e.ImageBytes, Detail: e.Detail}
		var key map[string]json.RawMessage
		if json.Unmarshal(e.SourceKey, &key) != nil || key["id"] == nil {
			continue
		}
		out[i].ID = string(key["id"])
		var text string
		if json.Unmarshal(key["id"], &text) == nil {
			out[i].ID = text // as ->> gives it
		}
		if n, err := strconv.Atoi(out[i].ID); err == nil {
			ids[i] = &n
		}
	}
	idx := make([]int, len(out))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		x, y := ids[idx[a]], ids[idx[b]]
		switch {
		case (x == nil) != (y == nil):
			return x == nil
		case x != nil && *x != *y:
			return *x < *y
		}
		return out[idx[a]].Rule < out[idx[b]].Rule
	})
	sorted := make([]errorRow, len(out))
	for i, j := range idx {
		sorted[i] = out[j]
	}
	return sorted
}

// maxCell bounds a free-text cell so that the tables stay readable whatever
// a model answers.
const maxCell = 120

// renderResults writes the results table.
func renderResults(w io.Writer, rows []resultRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tFORMAT\tBYTES\tCAPTION\tEMBEDDING")
	for _, r := range rows {
		bytes := "-"
		if r.Img != nil {
			bytes = strconv.Itoa(len(r.Img))
		}
		caption := "NULL"
		if r.Caption != nil {
			caption = clip(*r.Caption, maxCell)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Name, formatOf(r.Img), bytes, caption, vectorHead(r.Embedding, 4))
	}
	return tw.Flush()
}

// renderErrors writes the errors table.
func renderErrors(w io.Writer, rows []errorRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tID\tREASON\tIMAGE_BYTES\tDETAIL")
	for _, e := range rows {
		n := "-"
		if e.ImageBytes != nil {
			n = strconv.Itoa(int(*e.ImageBytes))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Rule, e.ID, e.Reason, n, clip(e.Detail, maxCell))
	}
	return tw.Flush()
}

// formatOf names what a value holds: an image format by its magic bytes,
// NULL, empty or unknown.
func formatOf(img []byte) string {
	if img == nil {
		return "NULL"
	}
	if len(img) == 0 {
		return "empty"
	}
	f, err := magic.Detect(img)
	if err != nil {
		return "unknown"
	}
	return f.String()
}

// vectorHead shows the first n values of v and its dimension.
func vectorHead(v []float32, n int) string {
	if v == nil {
		return "NULL"
	}
	parts := make([]string, 0, n+1)
	for _, x := range v[:min(n, len(v))] {
		p := strconv.FormatFloat(float64(x), 'f', 3, 32)
		if p == "-0.000" {
			p = "0.000"
		}
		parts = append(parts, p)
	}
	if len(v) > n {
		parts = append(parts, "…")
	}
	return fmt.Sprintf("[%s] dim %d", strings.Join(parts, " "), len(v))
}

// clip puts s on one line without control characters (tabs and newlines
// would break the table, escape sequences drive terminals) and
// cuts it to at most n runes, at a word boundary when one is near, marking
// the cut with an ellipsis.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' ' // an escape sequence from a model must not drive the terminal
		}
		return r
	}, s)), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	cut := string([]rune(s)[:n-1])
	if i := strings.LastIndexByte(cut, ' '); i > len(cut)*3/4 {
		cut = cut[:i] // at a word boundary when one is near
	}
	return strings.TrimRight(cut, " ") + "…"
}
