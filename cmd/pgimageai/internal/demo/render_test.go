package demo

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/pgimageai/pgimageai/state"
)

func ptr[T any](v T) *T { return &v }

func TestRenderResults(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n rest")
	rows := []resultRow{
		{ID: 1, Name: "sky.png", Img: png, Caption: ptr("A PNG image, 64x40 pixels, mostly blue."), Embedding: []float32{0.5, -0.25, -0.0001, 1, 0.3}},
		{ID: 5, Name: "no-image"},
		{ID: 6, Name: "empty", Img: []byte{}},
		{ID: 7, Name: "garbage", Img: []byte("not an image"), Caption: ptr("two\tlines\nhere"), Embedding: []float32{0.1}},
	}
	var b bytes.Buffer
	if err := renderResults(&b, rows); err != nil {
		t.Fatal(err)
	}
	want := `ID  NAME      FORMAT   BYTES  CAPTION                                  EMBEDDING
1   sky.png   PNG      13     A PNG image, 64x40 pixels, mostly blue.  [0.500 -0.250 0.000 1.000 …] dim 5
5   no-image  NULL     -      NULL                                     NULL
6   empty     empty    0      NULL                                     NULL
7   garbage   unknown  12     two lines here                           [0.100] dim 1
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestRenderErrors(t *testing.T) {
	rows := []errorRow{
		{Rule: "describe", ID: "6", Reason: "empty_image", ImageBytes: ptr[int32](0), Detail: "image is empty (0 bytes)"},
		{Rule: "embed", ID: "{}", Reason: "invalid_rule", Detail: strings.Repeat("x", 150)},
	}
	var b bytes.Buffer
	if err := renderErrors(&b, rows); err != nil {
		t.Fatal(err)
	}
	want := "RULE      ID  REASON        IMAGE_BYTES  DETAIL\n" +
		"describe  6   empty_image   0            image is empty (0 bytes)\n" +
		"embed     {}  invalid_rule  -            " + strings.Repeat("x", maxCell-1) + "…\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestClip(t *testing.T) {
	tests := []struct {
		name string
		in   string
		n    int
		want string
	}{
		{"short", "abc", 5, "abc"},
		{"exact", "abcde", 5, "abcde"},
		{"cut", "abcdef", 5, "abcd…"},
		{"cut in a long word", "abc defgh", 5, "abc…"},
		{"cut at a near space", "one two three four", 16, "one two three…"},
		{"no near space", "a bcdefghijklmnop", 10, "a bcdefgh…"},
		{"runes", "ééééééé", 4, "ééé…"},
		{"whitespace", " a\n\tb  c ", 10, "a b c"},
		{"escape sequence", "a\x1b[2Jb", 10, "a [2Jb"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := clip(tc.in, tc.n); got != tc.want {
				t.Errorf("clip(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
			}
		})
	}
}

// TestErrorRows: the open errors by the source row's id as a number, the
// errors of no row (invalid_rule) first, then by rule.
func TestErrorRows(t *testing.T) {
	open := []state.OpenError{
		{Rule: "embed", SourceKey: json.RawMessage(`{"id": 10}`), Reason: "empty_image", ImageBytes: ptr[int32](0)},
		{Rule: "describe", SourceKey: json.RawMessage(`{"id": 10}`), Reason: "empty_image"},
		{Rule: "describe", SourceKey: json.RawMessage(`{"id": 9}`), Reason: "unknown_format", Detail: "not an image"},
		{Rule: "embed", SourceKey: json.RawMessage(`{}`), Reason: "invalid_rule"},
		{Rule: "describe", SourceKey: json.RawMessage(`{"id": "x"}`), Reason: "provider_error"},
	}
	got := errorRows(open)
	want := []errorRow{
		{Rule: "describe", ID: "x", Reason: "provider_error"},
		{Rule: "embed", ID: "{}", Reason: "invalid_rule"},
		{Rule: "describe", ID: "9", Reason: "unknown_format", Detail: "not an image"},
		{Rule: "describe", ID: "10", Reason: "empty_image"},
		{Rule: "embed", ID: "10", Reason: "empty_image", ImageBytes: ptr[int32](0)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}
