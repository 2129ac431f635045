package catalog

import (
	"strings"
	"testing"
)

func TestIdentityProblem(t *testing.T) {
	table := &Table{Schema: "public", Name: "Photos", Regclass: `public."Photos"`}
	tests := []struct {
		name string
		id   Identity
		want string // substring; "" = no problem
	}{
		{"primary key", Identity{Kind: IdentityDefault, Key: []string{"id"}, Usable: true, PrimaryKey: true}, ""},
		{"using index", Identity{Kind: IdentityIndex, Index: "photos_code", Key: []string{"code"}, Usable: true}, ""},
		{"full with primary key", Identity{Kind: IdentityFull, Key: []string{"id"}, Usable: true, PrimaryKey: true}, ""},
		{"nothing with primary key", Identity{Kind: IdentityNothing, PrimaryKey: true},
			`its replica identity is NOTHING, so its changes carry no key to match results by; run: ALTER TABLE public."Photos" REPLICA IDENTITY DEFAULT`},
		{"nothing with a unique index", Identity{Kind: IdentityNothing, Candidate: "Photos_code"},
			`run: ALTER TABLE public."Photos" REPLICA IDENTITY USING INDEX "Photos_code"`},
		{"no primary key, no index", Identity{Kind: IdentityDefault},
			`it has no primary key and its replica identity is DEFAULT, so its changes carry no key to match results by; run: ALTER TABLE public."Photos" ADD PRIMARY KEY (`},
		{"identity index dropped", Identity{Kind: IdentityIndex, Candidate: "other"}, "its replica identity index is gone"},
		{"full without primary key", Identity{Kind: IdentityFull, Usable: true, Candidate: "u"}, "FULL and it has no primary key to match results by; run: ALTER TABLE public.\"Photos\" REPLICA IDENTITY USING INDEX u"},
		{"partition without identity", Identity{Kind: IdentityDefault, Key: []string{"id"}, PrimaryKey: true, Partition: "public.photos_2026"},
			"its partition public.photos_2026 has a replica identity that carries no key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.id.Problem(table)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Fatalf("Problem() = %q, want %q", got, tc.want)
			}
		})
	}
}
