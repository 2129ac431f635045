package sink

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/catalog"
)

func TestShadowName(t *testing.T) {
	long := strings.Repeat("a", 50)
	tests := []struct {
		name, live, version, want string
	}{
		{"short", "emb", "0123456789abcdef", "emb__v01234567"},
		{"short version", "emb", "abc", "emb__vabc"},
		{"40 bytes kept", strings.Repeat("b", 40), "0123456789abcdef", strings.Repeat("b", 40) + "__v01234567"},
		{"41 bytes cut", strings.Repeat("b", 41), "0123456789abcdef", strings.Repeat("b", 40) + "__v01234567"},
		{"long", long, "fedcba9876543210", long[:40] + "__vfedcba98"},
		// 39 ASCII bytes and a 2-byte é: 41 bytes, é dropped whole.
		{"cut before a character", strings.Repeat("c", 39) + "é", "01234567", strings.Repeat("c", 39) + "__v01234567"},
		// 38 bytes and a 3-byte €: 41 bytes, € dropped whole.
		{"cut before a 3-byte character", strings.Repeat("d", 38) + "€x", "01234567", strings.Repeat("d", 38) + "__v01234567"},
		// 37 bytes and a 3-byte €: 40 bytes, kept.
		{"character ends at 40", strings.Repeat("e", 37) + "€x", "01234567", strings.Repeat("e", 37) + "€__v01234567"},
		{"emoji", strings.Repeat("😀", 11), "01234567", strings.Repeat("😀", 10) + "__v01234567"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ShadowName(tt.live, tt.version)
			if got != tt.want {
				t.Errorf("ShadowName(%q, %q) = %q, want %q", tt.live, tt.version, got, tt.want)
			}
			if !utf8.ValidString(got) || len(got) > 51 {
				t.Errorf("ShadowName(%q, %q) = %q: invalid UTF-8 or longer than 51 bytes", tt.live, tt.version, got)
			}
		})
	}
}

func TestShadowIndexName(t *testing.T) {
	long := strings.Repeat("i", 70)
	tests := []struct {
		name, original, shadow string
		n                      int
		want                   string
	}{
		{"short", "t_emb_idx", "emb__v01234567", 0, "t_emb_idx__v01234567"},
		{"second", "t_emb_idx", "emb__v01234567", 2, "t_emb_idx_2__v01234567"},
		{"long", long, "emb__v01234567", 0, long[:52] + "__v01234567"},
		{"long second", long, "emb__v01234567", 12, long[:49] + "_12__v01234567"},
		{"shadow named otherwise", "t_emb_idx", "other", 0, "t_emb_idx__shadow"},
		{"utf-8", strings.Repeat("é", 30), "emb__v01234567", 0, strings.Repeat("é", 26) + "__v01234567"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := shadowIndexName(tt.original, shadowIndexSuffix(tt.shadow), tt.n)
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if len(got) > 63 || !utf8.ValidString(got) {
				t.Errorf("%q: longer than 63 bytes or invalid UTF-8", got)
			}
		})
	}
}

func TestParseShadowType(t *testing.T) {
	tests := []struct {
		in, sql, base string
		mod           int32
		bad           bool
	}{
		{in: "vector(16)", sql: "vector(16)", base: "vector", mod: 16},
		{in: "halfvec(3072)", sql: "halfvec(3072)", base: "halfvec", mod: 3072},
		{in: "extensions.vector(8)", sql: `"extensions".vector(8)`, base: `"extensions".vector`, mod: 8},
		{in: `"Odd ""Schema""".vector(8)`, sql: `"Odd ""Schema""".vector(8)`, base: `"Odd ""Schema""".vector`, mod: 8},
		{in: `"My Schema".halfvec(8)`, sql: `"My Schema".halfvec(8)`, base: `"My Schema".halfvec`, mod: 8},
		{in: "real[]", sql: "real[]", base: "real[]", mod: -1},
		{in: "text", sql: "text", base: "text", mod: -1},
		{in: "jsonb", sql: "jsonb", base: "jsonb", mod: -1},
		{in: "json", sql: "json", base: "json", mod: -1},
		{in: "vector", bad: true},
		{in: "vector(0)", bad: true},
		{in: "vector(123456)", bad: true},
		{in: "vector(-1)", bad: true},
		{in: "vector(16) ", bad: true},
		{in: "vector(16); DROP TABLE t", bad: true},
		{in: "vector(16), x int", bad: true},
		{in: "sparsevec(16)", bad: true},
		{in: "integer", bad: true},
		{in: "text[]", bad: true},
		{in: "character varying(20)", bad: true},
		{in: `"a"b".vector(8)`, bad: true},
		{in: `"Odd ""Schema"".vector(8)`, bad: true},
		{in: "Extensions.vector(8)", bad: true},
		{in: "", bad: true},
	}
	for _, tt := range tests {
		got, err := parseShadowType(tt.in)
		if tt.bad {
			if err == nil {
				t.Errorf("parseShadowType(%q) = %+v, want an error", tt.in, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseShadowType(%q): %v", tt.in, err)
			continue
		}
		if got.sql != tt.sql || got.base != tt.base || got.mod != tt.mod {
			t.Errorf("parseShadowType(%q) = %+v, want {%s %s %d}", tt.in, got, tt.sql, tt.base, tt.mod)
		}
	}
}

func TestShadowType(t *testing.T) {
	table := &catalog.Table{Schema: "public", Name: "t", Regclass: "public.t"}
	target := func(typ ResultType, sqlType string, mod int32) *Target {
		t.Helper()
		tg := &Target{Table: table, Key: []string{"id"}, Column: "c", Type: typ, SQLType: sqlType}
		if err := tg.checkColumn(catalog.Column{Name: "c", Type: sqlType, TypeMod: mod}); err != nil {
			t.Fatal(err)
		}
		return tg
	}
	tests := []struct {
		name string
		live *Target
		dim  int
		want string
		bad  bool
	}{
		{"vector", target(VectorResult, "vector(8)", 8), 16, "vector(16)", false},
		{"vector in a schema", target(VectorResult, "extensions.vector(8)", 8), 1536, "extensions.vector(1536)", false},
		{"vector of any dimension", target(VectorResult, "vector", -1), 4, "vector(4)", false},
		{"vector, dimension unknown", target(VectorResult, "vector(8)", 8), 0, "", true},
		{"real[]", target(VectorResult, "real[]", -1), 16, "real[]", false},
		{"text", target(TextResult, "text", -1), 0, "text", false},
		{"varchar", target(TextResult, "character varying(200)", 204), 0, "text", false},
		{"jsonb", target(JSONResult, "jsonb", -1), 0, "jsonb", false},
		{"json", target(JSONResult, "json", -1), 0, "json", false},
		{"json in text", target(JSONResult, "text", -1), 0, "text", false},
	}
	for _, tt := range tests {
		got, err := ShadowType(tt.live, tt.dim)
		if tt.bad != (err != nil) || got != tt.want {
			t.Errorf("%s: ShadowType = %q, %v; want %q (error: %v)", tt.name, got, err, tt.want, tt.bad)
		}
	}
}

func TestIndexOptions(t *testing.T) {
	tests := []struct {
		in   []string
		want string
		bad  bool
	}{
		{in: nil, want: ""},
		{in: []string{"m=16", "ef_construction=64"}, want: "m = 16, ef_construction = 64"},
		{in: []string{"lists=100"}, want: "lists = 100"},
		{in: []string{"fillfactor=70", "deduplicate_items=off"}, want: "fillfactor = 70, deduplicate_items = 'off'"},
		{in: []string{"buffering=auto"}, want: "buffering = 'auto'"},
		{in: []string{"x=1.5", "y=-2"}, want: "x = 1.5, y = -2"},
		{in: []string{"gin_pending_list_limit=4096"}, want: "gin_pending_list_limit = 4096"},
		{in: []string{"m"}, bad: true},
		{in: []string{"M=16"}, bad: true},
		{in: []string{"m=16)"}, bad: true},
		{in: []string{"m=16'"}, bad: true},
		{in: []string{"m=a b"}, bad: true},
		{in: []string{"m="}, bad: true},
		{in: []string{"a-b=1"}, bad: true},
		{in: []string{"m=1e5"}, bad: true},
		{in: []string{"m=16", "x=); DROP TABLE t; --"}, bad: true},
	}
	for _, tt := range tests {
		got, err := indexOptions(tt.in)
		if tt.bad {
			if err == nil {
				t.Errorf("indexOptions(%q) = %q, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("indexOptions(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestReferencesColumn(t *testing.T) {
	// As PostgreSQL 17 stores "WHERE id > 0 AND cap <> ''" (id is 1, cap 3).
	pred := `{BOOLEXPR :boolop and :args ({OPEXPR :opno 521 :args ({VAR :varno 1 :varattno 1 :vartype 23 :vartypmod -1} {CONST :consttype 23}) :location -1} {OPEXPR :opno 531 :args ({VAR :varno 1 :varattno 3 :vartype 25 :vartypmod -1} {CONST :consttype 25}) :location -1}) :location -1}`
	wholeRow := `({VAR :varno 1 :varattno 0 :vartype 16385 :vartypmod -1})`
	tests := []struct {
		tree   string
		attnum int16
		want   bool
	}{
		{"", 2, false},
		{pred, 1, true},
		{pred, 3, true},
		{pred, 2, false},
		{pred, 13, false},
		{wholeRow, 2, true},
	}
	for _, tt := range tests {
		if got := referencesColumn(tt.tree, tt.attnum); got != tt.want {
			t.Errorf("referencesColumn(%.40q, %d) = %v, want %v", tt.tree, tt.attnum, got, tt.want)
		}
	}
}

// queued returns the statements and arguments an op queues.
func queued(op Op) (sql []string, args [][]any) {
	b := &pgx.Batch{}
	op.Queue(b)
	for _, q := range b.QueuedQueries {
		sql = append(sql, q.SQL)
		args = append(args, q.Arguments)
	}
	return sql, args
}

func TestSwitchQueue(t *testing.T) {
	s := Switch{
		Table: pgx.Identifier{"Odd Schema", "My Table"}, Live: `emb"x`, Shadow: `emb"x__v01234567`,
		Indexes: []IndexPlan{
			{Schema: "Odd Schema", Original: "t_hnsw", Name: "t_hnsw__v01234567"},
			{Schema: "Odd Schema", Original: "t ivf", Name: "t ivf__v01234567"},
		},
		LockTimeout: 1500*time.Millisecond + 1,
	}
	sql, args := queued(s)
	want := []string{
		"SELECT set_config('lock_timeout', $1, true)",
		"SELECT set_config('pgimageai.switch_lock_start', extract(epoch FROM clock_timestamp())::text, true)",
		`ALTER TABLE "Odd Schema"."My Table" DROP COLUMN "emb""x"`,
		`ALTER TABLE "Odd Schema"."My Table" RENAME COLUMN "emb""x__v01234567" TO "emb""x"`,
		`ALTER INDEX "Odd Schema"."t_hnsw__v01234567" RENAME TO "t_hnsw"`,
		`ALTER INDEX "Odd Schema"."t ivf__v01234567" RENAME TO "t ivf"`,
	}
	if strings.Join(sql, "\n") != strings.Join(want, "\n") {
		t.Errorf("Switch queues\n%s\nwant\n%s", strings.Join(sql, "\n"), strings.Join(want, "\n"))
	}
	if len(args) == 0 || len(args[0]) != 1 || args[0][0] != "1501ms" {
		t.Errorf("lock_timeout argument %v, want 1501ms", args)
	}

	s.LockTimeout = 0
	if sql, _ := queued(s); strings.Contains(sql[0], "lock_timeout") {
		t.Errorf("no lock timeout: queued %q", sql[0])
	}
}

func TestDropShadowQueue(t *testing.T) {
	sql, args := queued(DropShadow{Table: pgx.Identifier{"public", "t"}, Shadow: "emb__v01234567", LockTimeout: 2 * time.Second})
	want := []string{
		"SELECT set_config('lock_timeout', $1, true)",
		`ALTER TABLE "public"."t" DROP COLUMN IF EXISTS "emb__v01234567"`,
	}
	if strings.Join(sql, "\n") != strings.Join(want, "\n") || args[0][0] != "2000ms" {
		t.Errorf("DropShadow queues %q %v, want %q with 2000ms", sql, args, want)
	}
}
