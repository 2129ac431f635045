package sink_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/migrations"
	"github.com/pgimageai/pgimageai/sink"
)

// TestEnsureFollowsWidenedKey: Ensure widens the key of a target it created
// when the source's key was widened, once; any other target (the user's, one
// a rule reads, or a change that is no widening) is an error that says what
// to do, and the table is left as it is.
func TestEnsureFollowsWidenedKey(t *testing.T) {
	ctx := context.Background()
	db := integration.NewDatabase(t)
	conn := db.Connect(t)
	if _, err := migrations.Apply(ctx, conn); err != nil {
		t.Fatal(err)
	}
	exec := func(t *testing.T, sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	typeOf := func(t *testing.T, table, column string) string {
		t.Helper()
		var typ string
		if err := conn.QueryRow(ctx, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = $1::regclass AND attname = $2", table, column).Scan(&typ); err != nil {
			t.Fatal(err)
		}
		return typ
	}
	tests := []struct {
		name    string
		key     string // the source's key type, first
		alter   string // then the source's key column becomes
		before  func(t *testing.T, src, tgt string)
		target  string // the target Ensure is given; default tgt
		want    string // the target's key type after; "" = unchanged
		wantErr string
	}{
		{name: "integer to bigint", key: "integer", alter: "bigint", want: "bigint"},
		{name: "smallint to integer", key: "smallint", alter: "integer", want: "integer"},
		{name: "varchar(8) to text", key: "varchar(8)", alter: "text", want: "text"},
		{name: "varchar(8) to varchar(64)", key: "varchar(8)", alter: "varchar(64)", want: "character varying(64)"},
		{name: "numeric(10,2) to numeric(14,4)", key: "numeric(10,2)", alter: "numeric(14,4)", want: "numeric(14,4)"},
		{name: "renamed after it was created", key: "integer", alter: "bigint", want: "bigint",
			before: func(t *testing.T, _, tgt string) {
				exec(t, fmt.Sprintf("ALTER TABLE %s RENAME TO %s_renamed", tgt, strings.TrimPrefix(tgt, "public.")))
			},
			target: "_renamed"},
		{name: "the user's table", key: "integer", alter: "bigint",
			before: func(t *testing.T, _, tgt string) {
				exec(t, "DELETE FROM pgimageai.created_targets WHERE relid = '"+tgt+"'::regclass")
			},
			wantErr: `the bridge widens only the target tables it created, so run: ALTER TABLE "public".%q ALTER COLUMN "id" TYPE bigint`},
		{name: "a table a rule reads", key: "integer", alter: "bigint",
			before: func(t *testing.T, _, tgt string) {
				exec(t, `INSERT INTO pgimageai.models (name, provider, model) VALUES ('m_widen', 'local', 'x') ON CONFLICT DO NOTHING`)
				exec(t, fmt.Sprintf(`ALTER TABLE %[1]s ADD COLUMN img bytea;
INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('reads_%[2]s', '%[1]s', 'img', 'AI_IMAGE_COMPLETE', 'm_widen', 'p', 'public.elsewhere', 'c')`, tgt, strings.TrimPrefix(tgt, "public.")))
			},
			wantErr: `so run: ALTER TABLE "public".%q ALTER COLUMN "id" TYPE bigint`},
		{name: "bigint to integer", key: "bigint", alter: "integer", wantErr: `key column "id" is bigint, the source's is integer; the bridge follows only a widening`},
		{name: "integer to text", key: "integer", alter: "text", wantErr: "never a narrowing or a change of kind"},
		{name: "varchar(64) to varchar(8)", key: "varchar(64)", alter: "varchar(8)", wantErr: "never a narrowing or a change of kind"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src, tgt := fmt.Sprintf("public.w_src%d", i), fmt.Sprintf("public.w_out%d", i)
			exec(t, fmt.Sprintf("CREATE TABLE %s (id %s PRIMARY KEY, img bytea)", src, tc.key))
			source, err := catalog.Lookup(ctx, conn, src)
			if err != nil {
				t.Fatal(err)
			}
			first, err := sink.Ensure(ctx, conn, tgt, source, "caption", sink.TextResult, true)
			if err != nil {
				t.Fatal(err)
			}
			if first.Altered != "" {
				t.Errorf("a new target altered: %s", first.Altered)
			}
			before := typeOf(t, tgt, "id")
			if tc.before != nil {
				tc.before(t, src, tgt)
			}
			if tc.target != "" {
				tgt += tc.target
			}
			exec(t, fmt.Sprintf("ALTER TABLE %s ALTER COLUMN id TYPE %s", src, tc.alter))
			if source, err = catalog.Lookup(ctx, conn, src); err != nil {
				t.Fatal(err)
			}
			target, err := sink.Ensure(ctx, conn, tgt, source, "caption", sink.TextResult, true)
			if tc.wantErr != "" {
				want := tc.wantErr
				if strings.Contains(want, "%q") {
					want = fmt.Sprintf(want, strings.TrimPrefix(tgt, "public."))
				}
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("Ensure: %v, want an error saying %s", err, want)
				}
				if got := typeOf(t, tgt, "id"); got != before {
					t.Errorf("the target's key became %s", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			stmt := fmt.Sprintf(`ALTER TABLE %s ALTER COLUMN "id" TYPE %s`, pgx.Identifier{"public", strings.TrimPrefix(tgt, "public.")}.Sanitize(), source.Columns[0].Type)
			if target.Altered != stmt {
				t.Errorf("Altered = %q, want %q", target.Altered, stmt)
			}
			if got := typeOf(t, tgt, "id"); got != tc.want {
				t.Errorf("the target's key is %s, want %s", got, tc.want)
			}
			again, err := sink.Ensure(ctx, conn, tgt, source, "caption", sink.TextResult, true)
			if err != nil || again.Altered != "" {
				t.Errorf("Ensure again: altered %q, %v; want nothing to do", again.Altered, err)
			}
		})
	}
}

// TestEnsureWriteBackWidened: a write-back target is the source itself;
// its key widened is no change to follow, and it is never altered.
func TestEnsureWriteBackWidened(t *testing.T) {
	ctx := context.Background()
	db := integration.NewDatabase(t)
	conn := db.Connect(t)
	if _, err := migrations.Apply(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE public.wb (id integer PRIMARY KEY, img bytea, caption text); ALTER TABLE public.wb ALTER COLUMN id TYPE bigint"); err != nil {
		t.Fatal(err)
	}
	source, err := catalog.Lookup(ctx, conn, "public.wb")
	if err != nil {
		t.Fatal(err)
	}
	target, err := sink.Ensure(ctx, conn, "public.wb", source, "caption", sink.TextResult, true)
	if err != nil || !target.WriteBack || target.Altered != "" {
		t.Fatalf("write-back target: %+v, %v", target, err)
	}
}
