package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/state"
)

// openError is an open row of pgimageai.errors.
type openError = state.OpenError

// ErrorList is the newest open errors that match the filters, and how many
// match in all.
type ErrorList struct {
	Errors   []openError
	Matching int64
	// Rule and Reason are the filters they match ("" = any).
	Rule   string
	Reason functions.Reason
}

// detailWidth is where a table cuts an error's detail; JSON keeps it whole.
const detailWidth = 100

// WriteErrors renders l as format (table or json).
func WriteErrors(w io.Writer, l ErrorList, format string) error {
	if format == FormatJSON {
		return JSON(w, errorsDocument(l))
	}
	var buf bytes.Buffer
	if len(l.Errors) == 0 {
		fmt.Fprintf(&buf, "no open errors%s\n", MatchText(l.Rule, l.Reason))
		_, err := w.Write(buf.Bytes())
		return err
	}
	t := newTable(&buf)
	t.row("ID", "RULE", "SOURCE_TABLE", "SOURCE_KEY", "REASON", "ATTEMPTS", "CREATED_AT", "DETAIL")
	for _, e := range l.Errors {
		t.row(strconv.FormatInt(e.ID, 10), e.Rule, e.SourceTable, string(e.SourceKey), string(e.Reason),
			strconv.FormatInt(int64(e.Attempts), 10), UTCTime(e.CreatedAt), truncateText(cellText(e.Detail), detailWidth))
	}
	t.flush()
	if int64(len(l.Errors)) < l.Matching {
		fmt.Fprintf(&buf, "showing the newest %d of %d open errors%s; --limit 0 lists all\n", len(l.Errors), l.Matching, MatchText(l.Rule, l.Reason))
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// MatchText describes the filters --rule and --reason for a message:
// " that match --rule x"; "" without filters.
func MatchText(rule string, reason functions.Reason) string {
	var f []string
	if rule != "" {
		f = append(f, "--rule "+rule)
	}
	if reason != "" {
		f = append(f, "--reason "+string(reason))
	}
	if len(f) == 0 {
		return ""
	}
	return " that match " + strings.Join(f, " ")
}

// The JSON document of `pgimageai errors --format json`.
type (
	errorsJSON struct {
		Matching int64       `json:"matching"` // open errors that match, beyond --limit
		Errors   []errorJSON `json:"errors"`   // newest first
	}
	errorJSON struct {
		ID          int64            `json:"id"`
		Rule        string           `json:"rule"`
		SourceTable string           `json:"source_table"`
		SourceKey   json.RawMessage  `json:"source_key"`
		Reason      functions.Reason `json:"reason"`
		Detail      string           `json:"detail"`
		ImageBytes  *int32           `json:"image_bytes"`
		LSN         *string          `json:"lsn"`
		Attempts    int32            `json:"attempts"`
		CreatedAt   time.Time        `json:"created_at"`
	}
)

func errorsDocument(l ErrorList) errorsJSON {
	doc := errorsJSON{Matching: l.Matching, Errors: []errorJSON{}}
	for _, e := range l.Errors {
		j := errorJSON{
			ID: e.ID, Rule: e.Rule, SourceTable: e.SourceTable, SourceKey: e.SourceKey, Reason: e.Reason,
			Detail: e.Detail, ImageBytes: e.ImageBytes, Attempts: e.Attempts, CreatedAt: e.CreatedAt.UTC(),
		}
		if e.LSN != nil {
			s := e.LSN.String()
			j.LSN = &s
		}
		doc.Errors = append(doc.Errors, j)
	}
	return doc
}
