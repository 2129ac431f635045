package replication

import (
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestPublicationDDL(t *testing.T) {
	photos := publishedTable{OID: 1, Ident: pgx.Identifier{"public", "photos"}}
	odd := publishedTable{OID: 2, Ident: pgx.Identifier{"Odd Schema", `My "Table"`}}
	rules := publishedTable{OID: 3, Ident: pgx.Identifier{"pgimageai", "rules"}}
	listed := publishedTable{OID: 1, Ident: pgx.Identifier{"public", "photos"}, Attrs: []int16{1, 2}, Columns: []string{"id", "Img"}}
	otherList := publishedTable{OID: 1, Ident: pgx.Identifier{"public", "photos"}, Attrs: []int16{1, 3}}
	const with = " WITH (" + publishOptions + ")"
	tests := []struct {
		name  string
		want  []publishedTable
		state publicationState
		found bool
		ddl   []string
	}{
		{name: "create", want: []publishedTable{photos, odd}, ddl: []string{
			`CREATE PUBLICATION "pgimageai" FOR TABLE "public"."photos", "Odd Schema"."My ""Table"""` + with}},
		{name: "create empty", ddl: []string{`CREATE PUBLICATION "pgimageai"` + with}},
		{name: "in sync, any order", want: []publishedTable{photos, rules}, found: true,
			state: publicationState{OptionsOK: true, Tables: []publishedTable{rules, photos}}},
		{name: "table added", want: []publishedTable{photos, rules}, found: true,
			state: publicationState{OptionsOK: true, Tables: []publishedTable{rules}},
			ddl:   []string{`ALTER PUBLICATION "pgimageai" SET TABLE "public"."photos", "pgimageai"."rules"`}},
		{name: "table removed", want: []publishedTable{rules}, found: true,
			state: publicationState{OptionsOK: true, Tables: []publishedTable{rules, photos}},
			ddl:   []string{`ALTER PUBLICATION "pgimageai" SET TABLE "pgimageai"."rules"`}},
		{name: "row filter reset", want: []publishedTable{photos}, found: true,
			state: publicationState{OptionsOK: true, Tables: []publishedTable{photos}, Filtered: true},
			ddl:   []string{`ALTER PUBLICATION "pgimageai" SET TABLE "public"."photos"`}},
		{name: "schema entries dropped", want: []publishedTable{photos}, found: true,
			state: publicationState{OptionsOK: true, Tables: []publishedTable{photos}, HasSchemas: true},
			ddl:   []string{`ALTER PUBLICATION "pgimageai" SET TABLE "public"."photos"`}},
		{name: "options reset", want: []publishedTable{photos}, found: true,
			state: publicationState{Tables: []publishedTable{photos}},
			ddl:   []string{`ALTER PUBLICATION "pgimageai" SET (` + publishOptions + `)`}},
		{name: "all removed", found: true,
			state: publicationState{OptionsOK: true, Tables: []publishedTable{photos, rules}},
			ddl:   []string{`ALTER PUBLICATION "pgimageai" DROP TABLE "public"."photos", "pgimageai"."rules"`}},
		{name: "create with a column list", want: []publishedTable{listed, rules}, ddl: []string{
			`CREATE PUBLICATION "pgimageai" FOR TABLE "public"."photos" ("id", "Img"), "pgimageai"."rules"` + with}},
		{name: "column list added", want: []publishedTable{listed}, found: true,
			state: publicationState{OptionsOK: true, Tables: []publishedTable{photos}},
			ddl:   []string{`ALTER PUBLICATION "pgimageai" SET TABLE "public"."photos" ("id", "Img")`}},
		{name: "column list changed", want: []publishedTable{listed}, found: true,
			state: publicationState{OptionsOK: true, Tables: []publishedTable{otherList}},
			ddl:   []string{`ALTER PUBLICATION "pgimageai" SET TABLE "public"."photos" ("id", "Img")`}},
		{name: "column list in sync", want: []publishedTable{listed}, found: true,
			state: publicationState{OptionsOK: true, Tables: []publishedTable{{OID: 1, Ident: pgx.Identifier{"public", "photos"}, Attrs: []int16{1, 2}}}}},
		{name: "column list reset", want: []publishedTable{photos}, found: true,
			state: publicationState{OptionsOK: true, Tables: []publishedTable{otherList}},
			ddl:   []string{`ALTER PUBLICATION "pgimageai" SET TABLE "public"."photos"`}},
		{name: "for all tables replaced", want: []publishedTable{photos}, found: true,
			state: publicationState{AllTables: true, OptionsOK: true},
			ddl: []string{`DROP PUBLICATION "pgimageai"`,
				`CREATE PUBLICATION "pgimageai" FOR TABLE "public"."photos"` + with}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := publicationDDL("pgimageai", tt.want, tt.state, tt.found)
			if !reflect.DeepEqual(got, tt.ddl) {
				t.Errorf("got  %q\nwant %q", got, tt.ddl)
			}
		})
	}
}
