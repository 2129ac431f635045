package main

import (
	"bytes"
	"context"
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

// errorList is the newest open errors that match the filters, and how many
// match in all.
type errorList struct {
	Errors   []openError
	Matching int64
}

// detailWidth is where a table cuts an error's detail; JSON keeps it whole.
const detailWidth = 100

// listErrors prints the open errors, newest first.
func listErrors(ctx context.Context, c config, stdout, _ io.Writer) error {
	target, err := connectTarget(ctx, c)
	if err != nil {
		return err
	}
	defer target.close(ctx)
	l, err := readErrors(ctx, target, c.Query)
	if err != nil {
		return err
	}
	return writeErrors(stdout, l, c.Query)
}

// readErrors reads the open errors that match q's filters, newest first, at
// most q.Limit of them (0 = all).
func readErrors(ctx context.Context, target *database, q queryFlags) (errorList, error) {
	var l errorList
	var err error
	if l.Errors, l.Matching, err = state.OpenErrors(ctx, target.conn, q.Rule, q.Reason, q.Limit); err != nil {
		return errorList{}, target.explain("list open errors", err)
	}
	return l, nil
}

// writeErrors renders l as q.Format (table or json).
func writeErrors(w io.Writer, l errorList, q queryFlags) error {
	if q.Format == formatJSON {
		return writeJSON(w, errorsDocument(l))
	}
	var buf bytes.Buffer
	if len(l.Errors) == 0 {
		fmt.Fprintf(&buf, "no open errors%s\n", matchText(q))
		_, err := w.Write(buf.Bytes())
		return err
	}
	t := newTable(&buf)
	t.row("ID", "RULE", "SOURCE_TABLE", "SOURCE_KEY", "REASON", "ATTEMPTS", "CREATED_AT", "DETAIL")
	for _, e := range l.Errors {
		t.row(strconv.FormatInt(e.ID, 10), e.Rule, e.SourceTable, string(e.SourceKey), string(e.Reason),
			strconv.FormatInt(int64(e.Attempts), 10), utcTime(e.CreatedAt), truncateText(cellText(e.Detail), detailWidth))
	}
	t.flush()
	if int64(len(l.Errors)) < l.Matching {
		fmt.Fprintf(&buf, "showing the newest %d of %d open errors%s; --limit 0 lists all\n", len(l.Errors), l.Matching, matchText(q))
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// matchText describes the filters of q for a message: " that match --rule x".
func matchText(q queryFlags) string {
	var f []string
	if q.Rule != "" {
		f = append(f, "--rule "+q.Rule)
	}
	if q.Reason != "" {
		f = append(f, "--reason "+string(q.Reason))
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

func errorsDocument(l errorList) errorsJSON {
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
