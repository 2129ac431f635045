package catalog

import "testing"

func TestQuoteIdent(t *testing.T) {
	tests := []struct{ name, want string }{
		{"img", "img"},
		{"_x1$", "_x1$"},
		{"pgimageai_t1", "pgimageai_t1"},
		{"Img", `"Img"`},
		{"1st", `"1st"`},
		{"$x", `"$x"`},
		{"Img; --", `"Img; --"`},
		{`a"b`, `"a""b"`},
		{"", `""`},
	}
	for _, tt := range tests {
		if got := QuoteIdent(tt.name); got != tt.want {
			t.Errorf("QuoteIdent(%q) = %s, want %s", tt.name, got, tt.want)
		}
	}
}
