package bridge

import (
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestDescending(t *testing.T) {
	tests := []struct {
		name  string
		names []string
		want  string
	}{
		{"one column", []string{`"id"`}, `s."id" DESC`},
		{"two columns", []string{`"a"`, `"b"`}, `s."a" DESC, s."b" DESC`},
		{"a name holding a comma and a space", []string{pgx.Identifier{"id, part"}.Sanitize()}, `s."id, part" DESC`},
		{"comma names among others", []string{`"x"`, pgx.Identifier{"id, part"}.Sanitize(), pgx.Identifier{`q"uote, d`}.Sanitize()},
			`s."x" DESC, s."id, part" DESC, s."q""uote, d" DESC`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := descending("s.", tt.names); got != tt.want {
				t.Errorf("descending = %s, want %s", got, tt.want)
			}
		})
	}
}
