package render

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/pgimageai/pgimageai/functions"
)

// queryFlags are the flags of `pgimageai errors` that reach the view.
type queryFlags struct {
	Format, Rule string
	Reason       functions.Reason
	Limit        int
}

// withFilters is l as readErrors returns it for q.
func withFilters(l ErrorList, q queryFlags) ErrorList {
	l.Rule, l.Reason = q.Rule, q.Reason
	return l
}

func TestWriteErrorsTable(t *testing.T) {
	all := sampleErrors()
	all.Matching = 2
	tests := []struct {
		name string
		l    ErrorList
		q    queryFlags
		want string
	}{
		{"page of more", sampleErrors(), queryFlags{Format: FormatTable, Rule: "caption", Limit: 2}, `  ID  RULE     SOURCE_TABLE   SOURCE_KEY  REASON          ATTEMPTS  CREATED_AT            DETAIL
  12  caption  public.photos  {"id": 42}  provider_error  3         2025-03-01T12:04:05Z  model gpt: HTTP 400: ` + strings.Repeat("x", 78) + `…
  7   caption  public.photos  {"id": 7}   empty_image     1         2025-03-01T11:04:05Z  image is empty but [31mred
showing the newest 2 of 5 open errors that match --rule caption; --limit 0 lists all
`},
		{"all", all, queryFlags{Format: FormatTable}, `  ID  RULE     SOURCE_TABLE   SOURCE_KEY  REASON          ATTEMPTS  CREATED_AT            DETAIL
  12  caption  public.photos  {"id": 42}  provider_error  3         2025-03-01T12:04:05Z  model gpt: HTTP 400: ` + strings.Repeat("x", 78) + `…
  7   caption  public.photos  {"id": 7}   empty_image     1         2025-03-01T11:04:05Z  image is empty but [31mred
`},
		{"none", ErrorList{}, queryFlags{Format: FormatTable}, "no open errors\n"},
		{"none that match", ErrorList{}, queryFlags{Format: FormatTable, Rule: "caption", Reason: "too_large"},
			"no open errors that match --rule caption --reason too_large\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := WriteErrors(&out, withFilters(tc.l, tc.q), tc.q.Format); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestWriteErrorsJSON(t *testing.T) {
	doc := decodeJSON(t, func(b *bytes.Buffer) error { return WriteErrors(b, sampleErrors(), FormatJSON) })
	want := map[string]any{
		"matching": 5.0,
		"errors": []any{
			map[string]any{
				"id": 12.0, "rule": "caption", "source_table": "public.photos", "source_key": map[string]any{"id": 42.0},
				"reason": "provider_error", "detail": "model gpt: HTTP 400: " + strings.Repeat("x", 120) + "\nsecond line",
				"image_bytes": 2048.0, "lsn": "0/1A2B3C0", "attempts": 3.0, "created_at": "2025-03-01T12:04:05Z",
			},
			map[string]any{
				"id": 7.0, "rule": "caption", "source_table": "public.photos", "source_key": map[string]any{"id": 7.0},
				"reason": "empty_image", "detail": "image is empty\tbut\x1b[31mred",
				"image_bytes": nil, "lsn": nil, "attempts": 1.0, "created_at": "2025-03-01T11:04:05Z",
			},
		},
	}
	if !reflect.DeepEqual(doc, want) {
		t.Errorf("got  %#v\nwant %#v", doc, want)
	}
	empty := decodeJSON(t, func(b *bytes.Buffer) error { return WriteErrors(b, ErrorList{}, FormatJSON) })
	if !reflect.DeepEqual(empty, map[string]any{"matching": 0.0, "errors": []any{}}) {
		t.Errorf("empty = %#v", empty)
	}
}
