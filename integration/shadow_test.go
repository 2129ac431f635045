package integration_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/internal/pgerr"
	"github.com/pgimageai/pgimageai/sink"
)

// Tests of the SQL side of a version switch (sink/shadow.go) on PostgreSQL
// 17 with pgvector: a shadow column beside the live one, copies of the live
// column's indexes built concurrently, what holds a switch, and the switch
// transaction itself.

// swExec runs sql on conn and fails t on error.
func swExec(t testing.TB, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// swVector is the SQL of a vector of dim values computed from the row's id
// and salt: the same for the same row.
func swVector(dim int, salt string) string {
	parts := make([]string, dim)
	for i := range parts {
		parts[i] = fmt.Sprintf("((id * %d + %d + %s) %% 97)::real / 97 + 0.01", dim, i, salt)
	}
	return "ARRAY[" + strings.Join(parts, ", ") + "]::real[]::vector"
}

// swTable creates table (id, emb vector(8), cap text) with rows rows, an
// HNSW index (cosine, m=8, ef_construction=32) and an IVFFlat one (l2,
// lists=4) on emb, and a btree on cap; it returns the table.
func swTable(t testing.TB, conn *pgx.Conn, table string, rows int) *catalog.Table {
	t.Helper()
	swExec(t, conn, "CREATE EXTENSION IF NOT EXISTS vector")
	id := pgx.Identifier{"public", table}.Sanitize()
	swExec(t, conn, fmt.Sprintf("CREATE TABLE %s (id int PRIMARY KEY, emb vector(8), cap text)", id))
	swExec(t, conn, fmt.Sprintf("INSERT INTO %s SELECT g, NULL, 'caption ' || g FROM generate_series(1, %d) g", id, rows))
	swExec(t, conn, fmt.Sprintf("UPDATE %s SET emb = %s", id, swVector(8, "0")))
	swExec(t, conn, fmt.Sprintf("CREATE INDEX %s ON %s USING hnsw (emb vector_cosine_ops) WITH (m = 8, ef_construction = 32)", pgx.Identifier{table + "_hnsw"}.Sanitize(), id))
	swExec(t, conn, fmt.Sprintf("CREATE INDEX %s ON %s USING ivfflat (emb vector_l2_ops) WITH (lists = 4)", pgx.Identifier{table + "_ivf"}.Sanitize(), id))
	swExec(t, conn, fmt.Sprintf("CREATE INDEX %s ON %s (cap)", pgx.Identifier{table + "_cap"}.Sanitize(), id))
	tbl, err := catalog.Lookup(context.Background(), conn, "public."+table)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// swIndex is an index as the catalogs hold it.
type swIndex struct {
	Table, Column, Method, OpClass string
	Options                        []string
	Valid, Unique                  bool
	Predicate                      string
	OID                            uint32
}

// swIndexOf reads index name of schema public; ok is false when there is none.
func swIndexOf(t testing.TB, conn *pgx.Conn, name string) (swIndex, bool) {
	t.Helper()
	var x swIndex
	err := conn.QueryRow(context.Background(), `SELECT i.indrelid::regclass::text, COALESCE(a.attname, ''), am.amname, opc.opcname,
  COALESCE(c.reloptions, '{}'), i.indisvalid, i.indisunique, COALESCE(pg_get_expr(i.indpred, i.indrelid), ''), c.oid
FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid JOIN pg_am am ON am.oid = c.relam
JOIN pg_opclass opc ON opc.oid = i.indclass[0]
LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
WHERE c.relnamespace = 'public'::regnamespace AND c.relname = $1`, name).
		Scan(&x.Table, &x.Column, &x.Method, &x.OpClass, &x.Options, &x.Valid, &x.Unique, &x.Predicate, &x.OID)
	if errors.Is(err, pgx.ErrNoRows) {
		return x, false
	}
	if err != nil {
		t.Fatalf("index %s: %v", name, err)
	}
	return x, true
}

// swColumnType returns the type of table's column as format_type prints
// it, or "" when there is no such column.
func swColumnType(t testing.TB, conn *pgx.Conn, table, column string) string {
	t.Helper()
	var typ string
	err := conn.QueryRow(context.Background(), `SELECT format_type(atttypid, atttypmod) FROM pg_attribute
WHERE attrelid = $1::regclass AND attname = $2 AND NOT attisdropped`, table, column).Scan(&typ)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("type of %s.%s: %v", table, column, err)
	}
	return typ
}

// swRun runs ops in one transaction, as a lane does, then reads
// sink.LockMillisSQL in it (where the switch's bookkeeping would), and
// commits.
func swRun(ctx context.Context, conn *pgx.Conn, ops ...sink.Op) (lockMs *float64, err error) {
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		for _, op := range ops {
			op.Queue(b)
		}
		n := b.Len()
		b.Queue("SELECT " + sink.LockMillisSQL)
		br := tx.SendBatch(ctx, b)
		defer br.Close()
		for range n {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		if err := br.QueryRow().Scan(&lockMs); err != nil {
			return err
		}
		return br.Close()
	})
	return lockMs, err
}

// swPlanAndBuild adds the shadow column of type typ and builds its indexes.
func swPlanAndBuild(t testing.TB, conn *pgx.Conn, table *catalog.Table, live, shadow, typ string) []sink.IndexPlan {
	t.Helper()
	ctx := context.Background()
	if err := sink.AddShadowColumn(ctx, conn, table, shadow, typ); err != nil {
		t.Fatal(err)
	}
	plans, err := sink.ShadowIndexes(ctx, conn, table, live, shadow)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.BuildShadowIndexes(ctx, conn, plans); err != nil {
		t.Fatal(err)
	}
	return plans
}

// TestShadowSwitchVector switches a vector(8) column with an HNSW and an
// IVFFlat index to a vector(16) shadow column: the copies of the indexes
// have the same method, operator class and options; after the switch the
// column has its old name, the new type and the shadow's values, the
// indexes their old names on it, and the planner uses the HNSW index.
func TestShadowSwitchVector(t *testing.T) {
	db := integration.NewDatabase(t)
	conn := db.Connect(t)
	ctx := t.Context()
	table := swTable(t, conn, "sw_vec", 500)
	shadow := sink.ShadowName("emb", "0123456789abcdef")
	if shadow != "emb__v01234567" {
		t.Fatalf("shadow name %q", shadow)
	}

	if err := sink.AddShadowColumn(ctx, conn, table, shadow, "vector(16)"); err != nil {
		t.Fatal(err)
	}
	if err := sink.AddShadowColumn(ctx, conn, table, shadow, "vector(16)"); err != nil {
		t.Fatalf("adding the shadow column again: %v", err)
	}
	if err := sink.AddShadowColumn(ctx, conn, table, shadow, "vector(12)"); err == nil || !strings.Contains(err.Error(), "exists as vector(16)") {
		t.Errorf("adding the shadow column with another type: %v, want an error saying it exists as vector(16)", err)
	}
	if err := sink.AddShadowColumn(ctx, conn, table, "x", "vector(16); DROP TABLE sw_vec"); err == nil {
		t.Error("a type that is not allowed was accepted")
	}
	if got := swColumnType(t, conn, "public.sw_vec", shadow); got != "vector(16)" {
		t.Fatalf("shadow column is %q, want vector(16)", got)
	}

	plans, err := sink.ShadowIndexes(ctx, conn, table, "emb", shadow)
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 2 {
		t.Fatalf("%d plans, want 2 (hnsw, ivfflat): %+v", len(plans), plans)
	}
	byOrig := map[string]sink.IndexPlan{}
	for _, p := range plans {
		byOrig[p.Original] = p
		t.Logf("plan: %s", p.Create)
	}
	h, ivf := byOrig["sw_vec_hnsw"], byOrig["sw_vec_ivf"]
	if h.Name != "sw_vec_hnsw__v01234567" || h.Method != "hnsw" || h.OpClass != `"public"."vector_cosine_ops"` || !slices.Equal(h.Options, []string{"m=8", "ef_construction=32"}) {
		t.Errorf("hnsw plan %+v", h)
	}
	if ivf.Name != "sw_vec_ivf__v01234567" || ivf.Method != "ivfflat" || ivf.OpClass != `"public"."vector_l2_ops"` || !slices.Equal(ivf.Options, []string{"lists=4"}) {
		t.Errorf("ivfflat plan %+v", ivf)
	}

	// The side rule's results.
	swExec(t, conn, fmt.Sprintf("UPDATE public.sw_vec SET %s = %s", pgx.Identifier{shadow}.Sanitize(), swVector(16, "1")))
	if err := sink.BuildShadowIndexes(ctx, conn, plans); err != nil {
		t.Fatal(err)
	}
	before := map[string]swIndex{}
	for _, p := range plans {
		orig, _ := swIndexOf(t, conn, p.Original)
		got, ok := swIndexOf(t, conn, p.Name)
		if !ok {
			t.Fatalf("shadow index %s missing", p.Name)
		}
		if !got.Valid || got.Column != shadow || got.Table != "sw_vec" || got.Method != orig.Method || got.OpClass != orig.OpClass || !slices.Equal(got.Options, orig.Options) {
			t.Errorf("shadow index %s = %+v, original %+v", p.Name, got, orig)
		}
		before[p.Name] = got
	}
	// Idempotent: planned and built again, nothing changes.
	again, err := sink.ShadowIndexes(ctx, conn, table, "emb", shadow)
	if err != nil || !slices.EqualFunc(again, plans, func(a, b sink.IndexPlan) bool { return a.Name == b.Name && a.Create == b.Create }) {
		t.Errorf("planned again: %+v, %v; want the same plans", again, err)
	}
	if err := sink.BuildShadowIndexes(ctx, conn, plans); err != nil {
		t.Fatal(err)
	}
	for _, p := range plans {
		if got, _ := swIndexOf(t, conn, p.Name); got.OID != before[p.Name].OID {
			t.Errorf("shadow index %s built again", p.Name)
		}
	}

	if obstacles, err := sink.SwitchObstacles(ctx, conn, table, "emb"); err != nil || len(obstacles) > 0 {
		t.Fatalf("obstacles %q, %v", obstacles, err)
	}
	lockMs, err := swRun(ctx, conn, sink.Switch{Table: table.Identifier(), Live: "emb", Shadow: shadow, Indexes: plans, LockTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("switch: %v", err)
	}
	if lockMs == nil || *lockMs <= 0 || *lockMs > 5000 {
		t.Errorf("lock ms %v", lockMs)
	} else {
		t.Logf("switch held its lock %.2f ms (to the bookkeeping)", *lockMs)
	}
	if got := swColumnType(t, conn, "public.sw_vec", "emb"); got != "vector(16)" {
		t.Errorf("emb is %q after the switch, want vector(16)", got)
	}
	if got := swColumnType(t, conn, "public.sw_vec", shadow); got != "" {
		t.Errorf("shadow column still there (%s)", got)
	}
	if n := queryInt(t, conn, fmt.Sprintf("SELECT count(*) FROM public.sw_vec WHERE emb = %s", swVector(16, "1"))); n != 500 {
		t.Errorf("%d rows hold the shadow's values, want 500", n)
	}
	for _, p := range plans {
		got, ok := swIndexOf(t, conn, p.Original)
		want := before[p.Name]
		if !ok || !got.Valid || got.Column != "emb" || got.Method != want.Method || got.OpClass != want.OpClass || !slices.Equal(got.Options, want.Options) || got.OID != want.OID {
			t.Errorf("index %s after the switch: %+v (found %v), want the shadow index %+v on emb", p.Original, got, ok, want)
		}
		if _, ok := swIndexOf(t, conn, p.Name); ok {
			t.Errorf("index %s still there", p.Name)
		}
	}
	if got, ok := swIndexOf(t, conn, "sw_vec_cap"); !ok || got.Column != "cap" {
		t.Errorf("btree on cap after the switch: %+v %v", got, ok)
	}

	// The planner can use the HNSW index on the new column.
	var plan strings.Builder
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "EXPLAIN SELECT id FROM public.sw_vec ORDER BY emb <=> $1::vector LIMIT 5", "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]")
		if err != nil {
			return err
		}
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				return err
			}
			plan.WriteString(line + "\n")
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan.String(), "sw_vec_hnsw") {
		t.Errorf("the planner does not use sw_vec_hnsw:\n%s", plan.String())
	}
	// And a query returns rows through it.
	if n := queryInt(t, conn, "SELECT count(*) FROM (SELECT id FROM public.sw_vec ORDER BY emb <=> '[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]' LIMIT 5) x"); n != 5 {
		t.Errorf("nearest neighbours: %d rows, want 5", n)
	}
}

// TestShadowObstacles: what depends on the live column, and a role that
// does not own the table, are reported with what to do; once they are
// gone, nothing is.
func TestShadowObstacles(t *testing.T) {
	db := integration.NewDatabase(t)
	conn := db.Connect(t)
	ctx := t.Context()
	table := swTable(t, conn, "sw_obs", 10)

	swExec(t, conn, "CREATE VIEW public.sw_obs_view AS SELECT id, emb FROM public.sw_obs")
	swExec(t, conn, "CREATE FUNCTION public.sw_obs_trg() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$")
	swExec(t, conn, "CREATE TRIGGER sw_obs_trigger BEFORE UPDATE OF emb ON public.sw_obs FOR EACH ROW EXECUTE FUNCTION public.sw_obs_trg()")
	swExec(t, conn, "ALTER TABLE public.sw_obs ADD CONSTRAINT sw_obs_check CHECK (vector_dims(emb) = 8)")
	swExec(t, conn, "ALTER TABLE public.sw_obs ADD COLUMN dims int GENERATED ALWAYS AS (vector_dims(emb)) STORED")
	// Nothing on cap is an obstacle of emb.
	swExec(t, conn, "CREATE VIEW public.sw_obs_caps AS SELECT id, cap FROM public.sw_obs")

	obstacles, err := sink.SwitchObstacles(ctx, conn, table, "emb")
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(obstacles, "\n")
	t.Logf("obstacles:\n%s", all)
	for _, want := range []string{
		`view public.sw_obs_view reads column "emb" of public.sw_obs, so the switch's DROP COLUMN would fail: drop the view`,
		`trigger sw_obs_trigger on table sw_obs depends on column "emb" of public.sw_obs, so the switch's DROP COLUMN would fail`,
		`constraint sw_obs_check on table sw_obs depends on column "emb" of public.sw_obs and the switch's DROP COLUMN would drop it`,
		`generated column dims of public.sw_obs is computed from column "emb"`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no obstacle says %q", want)
		}
	}
	if len(obstacles) != 4 || strings.Contains(all, "sw_obs_caps") || strings.Contains(all, "does not own") {
		t.Errorf("%d obstacles, want 4 (view, trigger, constraint, generated column)", len(obstacles))
	}

	swExec(t, conn, "DROP VIEW public.sw_obs_view")
	swExec(t, conn, "DROP TRIGGER sw_obs_trigger ON public.sw_obs")
	swExec(t, conn, "ALTER TABLE public.sw_obs DROP CONSTRAINT sw_obs_check, DROP COLUMN dims")
	if obstacles, err := sink.SwitchObstacles(ctx, conn, table, "emb"); err != nil || len(obstacles) > 0 {
		t.Fatalf("after dropping them: %q, %v", obstacles, err)
	}

	// A role that does not own the table (roles are the server's: the
	// database's name makes it unique).
	role := db.Name + "_r"
	swExec(t, conn, "CREATE ROLE "+pgx.Identifier{role}.Sanitize())
	t.Cleanup(func() { db.Exec(t, "DROP ROLE IF EXISTS "+pgx.Identifier{role}.Sanitize()) })
	swExec(t, conn, "SET ROLE "+pgx.Identifier{role}.Sanitize())
	obstacles, err = sink.SwitchObstacles(ctx, conn, table, "emb")
	swExec(t, conn, "RESET ROLE")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`role %s does not own table public.sw_obs ("postgres" does): the switch's ALTER TABLE needs the owner's rights; run GRANT "postgres" TO %[1]s`, pgx.Identifier{role}.Sanitize())
	if len(obstacles) != 1 || !strings.HasPrefix(obstacles[0], want) {
		t.Errorf("as a role not owning the table: %q, want one starting %q", obstacles, want)
	}
	// A member of the owning role may run the switch.
	swExec(t, conn, fmt.Sprintf("GRANT postgres TO %s", pgx.Identifier{role}.Sanitize()))
	t.Cleanup(func() { db.Exec(t, "REVOKE postgres FROM "+pgx.Identifier{role}.Sanitize()) })
	swExec(t, conn, "SET ROLE "+pgx.Identifier{role}.Sanitize())
	obstacles, err = sink.SwitchObstacles(ctx, conn, table, "emb")
	swExec(t, conn, "RESET ROLE")
	if err != nil || len(obstacles) > 0 {
		t.Errorf("as a member of the owner: %q, %v", obstacles, err)
	}
}

// TestShadowIndexesRefused: indexes involving the live column otherwise
// than as their only column hold the switch, each named; simple ones keep
// uniqueness, order and a predicate on other columns; an interrupted
// CREATE INDEX CONCURRENTLY (left INVALID) is dropped and built again.
func TestShadowIndexesRefused(t *testing.T) {
	db := integration.NewDatabase(t)
	conn := db.Connect(t)
	ctx := t.Context()
	swExec(t, conn, "CREATE TABLE public.sw_txt (id int PRIMARY KEY, cap text, n int)")
	swExec(t, conn, "INSERT INTO public.sw_txt SELECT g, 'caption ' || g, g FROM generate_series(1, 100) g")
	swExec(t, conn, "CREATE INDEX sw_txt_lower ON public.sw_txt (lower(cap))")
	swExec(t, conn, "CREATE INDEX sw_txt_multi ON public.sw_txt (n, cap)")
	swExec(t, conn, "CREATE INDEX sw_txt_incl ON public.sw_txt (n) INCLUDE (cap)")
	swExec(t, conn, "CREATE INDEX sw_txt_part ON public.sw_txt (cap) WHERE cap <> ''")
	swExec(t, conn, "CREATE INDEX sw_txt_where ON public.sw_txt (n) WHERE cap IS NOT NULL")
	// Copied:
	swExec(t, conn, "CREATE UNIQUE INDEX sw_txt_uniq ON public.sw_txt (cap DESC NULLS LAST) WITH (fillfactor = 70, deduplicate_items = off) WHERE id > 0")
	swExec(t, conn, `CREATE INDEX sw_txt_c ON public.sw_txt (cap COLLATE "C" text_pattern_ops)`)
	// Not about cap:
	swExec(t, conn, "CREATE INDEX sw_txt_n ON public.sw_txt (n)")
	table, err := catalog.Lookup(ctx, conn, "public.sw_txt")
	if err != nil {
		t.Fatal(err)
	}
	shadow := sink.ShadowName("cap", "abcdef0123456789")
	if err := sink.AddShadowColumn(ctx, conn, table, shadow, "text"); err != nil {
		t.Fatal(err)
	}

	_, err = sink.ShadowIndexes(ctx, conn, table, "cap", shadow)
	var ie *sink.IndexError
	if !errors.As(err, &ie) {
		t.Fatalf("ShadowIndexes: %v, want an *IndexError", err)
	}
	t.Logf("held: %v", err)
	for _, want := range []string{
		`index public.sw_txt_incl has other columns beside "cap"`,
		`index public.sw_txt_lower uses "cap" in an expression`,
		`index public.sw_txt_multi has other columns beside "cap"`,
		`index public.sw_txt_part has a predicate on "cap" (WHERE (cap <> ''::text))`,
		`index public.sw_txt_where has a predicate on "cap"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q", want)
		}
	}
	if len(ie.Reasons) != 5 {
		t.Errorf("%d reasons, want 5: %q", len(ie.Reasons), ie.Reasons)
	}
	for _, idx := range []string{"sw_txt_lower", "sw_txt_multi", "sw_txt_incl", "sw_txt_part", "sw_txt_where"} {
		swExec(t, conn, "DROP INDEX public."+idx)
	}

	plans, err := sink.ShadowIndexes(ctx, conn, table, "cap", shadow)
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 2 {
		t.Fatalf("plans %+v, want sw_txt_c and sw_txt_uniq", plans)
	}
	u := plans[1]
	wantCreate := `CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS "sw_txt_uniq__vabcdef01" ON "public"."sw_txt" USING "btree" ("cap__vabcdef01" COLLATE "pg_catalog"."default" "pg_catalog"."text_ops" DESC NULLS LAST) WITH (fillfactor = 70, deduplicate_items = 'off') WHERE (id > 0)`
	if u.Original != "sw_txt_uniq" || u.Create != wantCreate {
		t.Errorf("unique plan:\n%s\nwant\n%s", u.Create, wantCreate)
	}
	c := plans[0]
	wantCreate = `CREATE INDEX CONCURRENTLY IF NOT EXISTS "sw_txt_c__vabcdef01" ON "public"."sw_txt" USING "btree" ("cap__vabcdef01" COLLATE "pg_catalog"."C" "pg_catalog"."text_pattern_ops")`
	if c.Original != "sw_txt_c" || c.Create != wantCreate {
		t.Errorf("collation plan:\n%s\nwant\n%s", c.Create, wantCreate)
	}

	// An interrupted build: the unique index meets duplicates, and stays
	// behind INVALID.
	swExec(t, conn, fmt.Sprintf("UPDATE public.sw_txt SET %s = 'same'", pgx.Identifier{shadow}.Sanitize()))
	if _, err := conn.Exec(ctx, u.Create); pgerr.SQLState(err) != "23505" {
		t.Fatalf("unique build over duplicates: %v, want SQLSTATE 23505", err)
	}
	if got, ok := swIndexOf(t, conn, u.Name); !ok || got.Valid {
		t.Fatalf("after the failed build: %+v (found %v), want an invalid index", got, ok)
	}
	invalid, _ := swIndexOf(t, conn, u.Name)
	// Planning again takes the same name (the invalid index is the plan's).
	if again, err := sink.ShadowIndexes(ctx, conn, table, "cap", shadow); err != nil || again[1].Name != u.Name {
		t.Fatalf("planned again: %+v, %v", again, err)
	}
	if err := sink.BuildShadowIndexes(ctx, conn, plans); pgerr.SQLState(err) != "23505" {
		t.Errorf("built over duplicates again: %v, want SQLSTATE 23505", err)
	}
	swExec(t, conn, fmt.Sprintf("UPDATE public.sw_txt SET %s = 'new caption ' || id", pgx.Identifier{shadow}.Sanitize()))
	if err := sink.BuildShadowIndexes(ctx, conn, plans); err != nil {
		t.Fatal(err)
	}
	got, ok := swIndexOf(t, conn, u.Name)
	if !ok || !got.Valid || !got.Unique || got.OID == invalid.OID || got.Predicate != "(id > 0)" || !slices.Equal(got.Options, []string{"fillfactor=70", "deduplicate_items=off"}) {
		t.Errorf("rebuilt unique index %+v, want a new valid unique index WHERE (id > 0) with the options", got)
	}

	// A relation of a plan's name that is none of ours is an error, not
	// silently kept by IF NOT EXISTS.
	swExec(t, conn, "DROP INDEX public.sw_txt_c__vabcdef01")
	swExec(t, conn, fmt.Sprintf("CREATE TABLE public.%s (x int)", pgx.Identifier{"sw_txt_c__vabcdef01"}.Sanitize()))
	if err := sink.BuildShadowIndexes(ctx, conn, plans); err == nil || !strings.Contains(err.Error(), "is no index of") {
		t.Errorf("a table of the shadow index's name: %v", err)
	}
	// Planning again finds another name.
	plans, err = sink.ShadowIndexes(ctx, conn, table, "cap", shadow)
	if err != nil || plans[0].Name != "sw_txt_c_1__vabcdef01" || plans[1].Name != u.Name {
		t.Fatalf("planned beside the table: %+v, %v", plans, err)
	}
	if err := sink.BuildShadowIndexes(ctx, conn, plans); err != nil {
		t.Fatal(err)
	}

	if _, err := swRun(ctx, conn, sink.Switch{Table: table.Identifier(), Live: "cap", Shadow: shadow, Indexes: plans}); err != nil {
		t.Fatal(err)
	}
	for _, idx := range []string{"sw_txt_uniq", "sw_txt_c"} {
		if got, ok := swIndexOf(t, conn, idx); !ok || got.Column != "cap" || !got.Valid {
			t.Errorf("%s after the switch: %+v %v", idx, got, ok)
		}
	}
	if n := queryInt(t, conn, "SELECT count(*) FROM public.sw_txt WHERE cap = 'new caption ' || id"); n != 100 {
		t.Errorf("%d rows with the new captions, want 100", n)
	}
}

// TestShadowSwitchLockTimeout: a reader holding ACCESS SHARE on the table
// makes the switch fail with SQLSTATE 55P03 after its lock timeout, and the
// table is as it was; DropShadow then removes the shadow column and its
// indexes.
func TestShadowSwitchLockTimeout(t *testing.T) {
	db := integration.NewDatabase(t)
	conn, reader := db.Connect(t), db.Connect(t)
	ctx := t.Context()
	table := swTable(t, conn, "sw_lock", 100)
	shadow := sink.ShadowName("emb", "feedfacefeedface")
	plans := swPlanAndBuild(t, conn, table, "emb", shadow, "vector(16)")

	tx, err := reader.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT id FROM public.sw_lock LIMIT 1"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = swRun(ctx, conn, sink.Switch{Table: table.Identifier(), Live: "emb", Shadow: shadow, Indexes: plans, LockTimeout: 300 * time.Millisecond})
	took := time.Since(start)
	if pgerr.SQLState(err) != "55P03" {
		t.Fatalf("switch beside a reader: %v, want SQLSTATE 55P03", err)
	}
	if took < 300*time.Millisecond || took > 3*time.Second {
		t.Errorf("the switch failed after %s, want about 300ms", took)
	}
	t.Logf("failed after %s: %v", took, err)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := swColumnType(t, conn, "public.sw_lock", "emb"); got != "vector(8)" {
		t.Errorf("emb is %q, want vector(8) still", got)
	}
	if got := swColumnType(t, conn, "public.sw_lock", shadow); got != "vector(16)" {
		t.Errorf("shadow is %q, want vector(16) still", got)
	}
	for _, p := range plans {
		if got, ok := swIndexOf(t, conn, p.Original); !ok || got.Column != "emb" {
			t.Errorf("%s after the failed switch: %+v %v", p.Original, got, ok)
		}
		if got, ok := swIndexOf(t, conn, p.Name); !ok || got.Column != shadow {
			t.Errorf("%s after the failed switch: %+v %v", p.Name, got, ok)
		}
	}

	// The same lock timeout bounds DropShadow.
	tx, err = reader.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT id FROM public.sw_lock LIMIT 1"); err != nil {
		t.Fatal(err)
	}
	drop := sink.DropShadow{Table: table.Identifier(), Shadow: shadow, LockTimeout: 200 * time.Millisecond}
	if _, err := swRun(ctx, conn, drop); pgerr.SQLState(err) != "55P03" {
		t.Errorf("DropShadow beside a reader: %v, want SQLSTATE 55P03", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := swRun(ctx, conn, drop); err != nil {
		t.Fatal(err)
	}
	if got := swColumnType(t, conn, "public.sw_lock", shadow); got != "" {
		t.Errorf("shadow column still there: %s", got)
	}
	for _, p := range plans {
		if _, ok := swIndexOf(t, conn, p.Name); ok {
			t.Errorf("%s still there after DropShadow", p.Name)
		}
		if got, ok := swIndexOf(t, conn, p.Original); !ok || got.Column != "emb" {
			t.Errorf("%s after DropShadow: %+v %v", p.Original, got, ok)
		}
	}
	if _, err := swRun(ctx, conn, drop); err != nil {
		t.Errorf("DropShadow of a column already gone: %v", err)
	}
}
