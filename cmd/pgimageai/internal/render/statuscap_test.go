package render

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestWriteStatusErrorCaps: a rule whose cap kept failures out of
// pgimageai.errors is listed with its open rows, its cap and how many were
// not recorded, in the table and in JSON; none listed says nothing.
func TestWriteStatusErrorCaps(t *testing.T) {
	at := time.Date(2025, 3, 1, 12, 4, 5, 0, time.FixedZone("CET", 3600))
	r := sampleStatus()
	r.ErrorCaps = []errorCap{
		{Rule: "caption", Open: 5, MaxOpen: pointerTo[int64](5), Dropped: 15, LastDroppedAt: &at},
		{Rule: "embed", Open: 2, Dropped: 1},
	}
	var buf bytes.Buffer
	if err := WriteStatus(&buf, r, FormatTable); err != nil {
		t.Fatal(err)
	}
	want := `Failures not recorded (the rule was at its cap of open errors rows; see pgimageai.error_counts)
  RULE     OPEN  CAP   NOT RECORDED  LAST
  caption  5     5     15            2025-03-01T11:04:05Z
  embed    2     none  1             -
`
	if !strings.Contains(buf.String(), want) {
		t.Errorf("status lacks\n%s\ngot\n%s", want, buf.String())
	}

	doc := decodeJSON(t, func(b *bytes.Buffer) error { return WriteStatus(b, r, FormatJSON) })
	wantJSON := []any{
		map[string]any{"rule": "caption", "open": 5.0, "max_open": 5.0, "not_recorded": 15.0, "last_not_recorded_at": "2025-03-01T11:04:05Z"},
		map[string]any{"rule": "embed", "open": 2.0, "max_open": nil, "not_recorded": 1.0, "last_not_recorded_at": nil},
	}
	if !reflect.DeepEqual(doc["errors_not_recorded"], wantJSON) {
		t.Errorf("errors_not_recorded = %#v, want %#v", doc["errors_not_recorded"], wantJSON)
	}

	buf.Reset()
	if err := WriteStatus(&buf, sampleStatus(), FormatTable); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "not recorded") {
		t.Errorf("status without dropped failures mentions them:\n%s", buf.String())
	}
	doc = decodeJSON(t, func(b *bytes.Buffer) error { return WriteStatus(b, sampleStatus(), FormatJSON) })
	if got, ok := doc["errors_not_recorded"].([]any); !ok || len(got) != 0 {
		t.Errorf("errors_not_recorded = %#v, want []", doc["errors_not_recorded"])
	}
}
