package sink

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestShadowName: the shadow column's name keeps at most 40 bytes of the
// live column's, cut on a rune boundary, within PostgreSQL's 63.
func TestShadowName(t *testing.T) {
	tests := []struct {
		name, live, version, want string
	}{
		{name: "short", live: "v", version: "30532fc8ca9290a6", want: "v__v30532fc8"},
		{name: "long", live: strings.Repeat("a", 70), version: "0123456789abcdef", want: strings.Repeat("a", 40) + "__v01234567"},
		{name: "multibyte at the cut", live: strings.Repeat("a", 39) + "é" + "b", version: "0123456789abcdef", want: strings.Repeat("a", 39) + "__v01234567"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ShadowName(tc.live, tc.version)
			if got != tc.want || len(got) > 63 || !utf8.ValidString(got) {
				t.Errorf("ShadowName(%q) = %q, want %q", tc.live, got, tc.want)
			}
		})
	}
}

// TestShadowTypes: only the types a function writes are accepted for a
// shadow column; nothing else reaches the DDL.
func TestShadowTypes(t *testing.T) {
	for typ, ok := range map[string]bool{
		"vector(16)": true, "vector(1536)": true, "halfvec(3072)": true, "real[]": true, "text": true, "jsonb": true,
		"vector(0)": false, "vector(16); DROP TABLE x": false, "integer": false, "vector": false, "": false,
	} {
		if got := shadowTypes.MatchString(typ); got != ok {
			t.Errorf("%q accepted = %v, want %v", typ, got, ok)
		}
	}
}
