package render

import (
	"bytes"
	"testing"
)

func TestTruncateText(t *testing.T) {
	tests := []struct {
		name string
		s    string
		n    int
		want string
	}{
		{"short", "abc", 5, "abc"},
		{"exact", "abcde", 5, "abcde"},
		{"cut", "abcdef", 5, "abcd…"},
		{"runes, not bytes", "äöüßéè", 4, "äöü…"},
		{"no space before the mark", "ab  cdef", 4, "ab…"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := truncateText(tc.s, tc.n); got != tc.want {
				t.Errorf("truncateText(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
			}
		})
	}
}

func TestByteSize(t *testing.T) {
	tests := []struct {
		n    uint64
		want string
	}{
		{0, "0 bytes"},
		{1023, "1023 bytes"},
		{1024, "1024 bytes (1.0 KiB)"},
		{5<<20 + 512<<10, "5767168 bytes (5.5 MiB)"},
		{3 << 40, "3298534883328 bytes (3.0 TiB)"},
		{1<<64 - 1, "18446744073709551615 bytes (16.0 EiB)"},
	}
	for _, tc := range tests {
		if got := byteSize(tc.n); got != tc.want {
			t.Errorf("byteSize(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestTableCells(t *testing.T) {
	var buf bytes.Buffer
	tab := newTable(&buf)
	tab.row("A", "B")
	tab.row("tab\there", "new\nline\x1b[2J")
	tab.flush()
	want := "  A         B\n  tab here  new line [2J\n"
	if buf.String() != want {
		t.Errorf("got %q, want %q", buf.String(), want)
	}
}
