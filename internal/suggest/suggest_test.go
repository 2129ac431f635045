package suggest

import "testing"

func TestClosest(t *testing.T) {
	commands := []string{"migrate", "run", "status", "errors", "retry", "doctor", "uninstall"}
	tests := []struct {
		name, got string
		want      string
		ok        bool
	}{
		{"transposition", "stauts", "status", true},
		{"one letter off", "retyr", "retry", true},
		{"missing letter", "migrat", "migrate", true},
		{"prefix", "uninst", "uninstall", true},
		{"case", "STATUS", "status", true},
		{"dashes ignored", "--doctr", "doctor", true},
		{"short name, one edit", "rum", "run", true},
		{"short name, two edits is too far", "rxx", "", false},
		{"nothing close", "frobnicate", "", false},
		{"empty", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Closest(tt.got, commands)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("Closest(%q) = %q, %v; want %q, %v", tt.got, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestHint(t *testing.T) {
	if h := Hint("stauts", []string{"status"}); h != ` (did you mean "status"?)` {
		t.Fatalf("Hint = %q", h)
	}
	if h := Hint("status", []string{"status"}); h != "" {
		t.Fatalf("Hint of an exact name = %q, want none", h)
	}
	if h := Hint("zzzzzz", []string{"status"}); h != "" {
		t.Fatalf("Hint of a far name = %q, want none", h)
	}
}

func TestDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"ab", "ba", 1}, {"status", "stauts", 1},
	}
	for _, tt := range tests {
		if got := distance(tt.a, tt.b); got != tt.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
