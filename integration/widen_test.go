package integration_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/magic"
)

// Tests of a source's key widened by DDL: the targets the bridge created
// follow it, the others are invalid_rule with the statement to run.

// widenRule inserts an AI_IMAGE_COMPLETE rule of model vision on source's
// img column, writing target's caption column.
func widenRule(t testing.TB, s *source, name, source, target string) {
	t.Helper()
	s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ($1, $2, 'img', 'AI_IMAGE_COMPLETE', 'vision', 'Describe the image', $3, 'caption')`, name, source, target)
}

// columnType returns the type of table's column as format_type prints it.
func columnType(t testing.TB, s *source, table, column string) string {
	t.Helper()
	var typ string
	if err := s.conn.QueryRow(context.Background(), `SELECT format_type(atttypid, atttypmod) FROM pg_attribute
WHERE attrelid = $1::regclass AND attname = $2 AND NOT attisdropped`, table, column).Scan(&typ); err != nil {
		t.Fatalf("type of %s.%s: %v", table, column, err)
	}
	return typ
}

// wantCaptions checks that table holds, keyed by key (as text), the caption
// of each image of want.
func wantCaptions(t testing.TB, s *source, table, key string, want map[string][]byte) {
	t.Helper()
	rows, err := s.conn.Query(context.Background(), fmt.Sprintf("SELECT %s::text, caption FROM %s", key, table))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for rows.Next() {
		var k string
		var c *string
		if err := rows.Scan(&k, &c); err != nil {
			t.Fatal(err)
		}
		if c != nil {
			got[k] = *c
		}
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	for k, img := range want {
		if w := captionOf(magic.DataURL(magic.PNG, img)); got[k] != w {
			t.Errorf("%s row %s: caption %q, want %q", table, k, got[k], w)
		}
	}
}

// TestWidenKeyCreatedTarget widens the primary keys of two source tables
// (integer to bigint, varchar(8) to text) while the bridge streams: the
// targets it created follow, rows with keys that only fit the new types get
// their results, and re-validating the rules (a rule edited, a restart)
// finds nothing invalid.
func TestWidenKeyCreatedTarget(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.exec(t, "CREATE TABLE public.d_src (id integer PRIMARY KEY, img bytea)")
	s.exec(t, "CREATE TABLE public.v_src (k varchar(8) PRIMARY KEY, img bytea)")
	widenRule(t, s, "d", "public.d_src", "public.d_out")
	widenRule(t, s, "v", "public.v_src", "public.v_out")
	cfg := s.config(t)
	cfg.Timing.RecheckInterval = 300 * time.Millisecond
	logs := captureLogs(t, &cfg)

	d, v := map[string][]byte{}, map[string][]byte{}
	seed := 0
	insert := func() {
		t.Helper()
		ids := []int64{int64(len(d) + 1), 1<<31 + int64(len(d)), 5_000_000_000 + int64(len(d))}
		keys := []string{fmt.Sprintf("k%d", len(v)), fmt.Sprintf("a key longer than eight, number %d", len(v))}
		if columnType(t, s, "public.d_src", "id") == "integer" {
			ids = ids[:1]
		}
		if columnType(t, s, "public.v_src", "k") != "text" {
			keys = keys[:1]
		}
		for _, id := range ids {
			seed++
			img := pngImage(t, seed)
			s.exec(t, "INSERT INTO public.d_src (id, img) VALUES ($1, $2)", id, img)
			d[fmt.Sprint(id)] = img
		}
		for _, k := range keys {
			seed++
			img := pngImage(t, seed)
			s.exec(t, "INSERT INTO public.v_src (k, img) VALUES ($1, $2)", k, img)
			v[k] = img
		}
	}
	check := func(when string) {
		t.Helper()
		s.sync(t, 30*time.Second)
		t.Logf("checking %s", when)
		wantCaptions(t, s, "public.d_out", "id", d)
		wantCaptions(t, s, "public.v_out", "k", v)
		if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE reason = 'invalid_rule'"); n != 0 {
			var detail string
			_ = s.conn.QueryRow(context.Background(), "SELECT string_agg(rule || ': ' || detail, '; ') FROM pgimageai.errors WHERE reason = 'invalid_rule'").Scan(&detail)
			t.Fatalf("%s: %d invalid_rule rows: %s", when, n, detail)
		}
		if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE resolved_at IS NULL"); n != 0 {
			t.Errorf("%s: %d open errors rows", when, n)
		}
	}

	_, stop := s.start(t, cfg)
	insert()
	check("before the DDL")
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.created_targets WHERE relid IN ('public.d_out'::regclass, 'public.v_out'::regclass)"); n != 2 {
		t.Fatalf("created_targets records %d of the 2 targets the bridge created", n)
	}

	// The lane of public.d_out is busy writing when the ALTER comes: a
	// transaction of rows whose calls take a little while each.
	ai.Set(2*time.Millisecond, nil)
	busy := &pgx.Batch{}
	for i := 1000; i < 1300; i++ {
		img := pngImage(t, i)
		busy.Queue("INSERT INTO public.d_src (id, img) VALUES ($1, $2)", i, img)
		d[fmt.Sprint(i)] = img
	}
	if err := pgx.BeginFunc(context.Background(), s.conn, func(tx pgx.Tx) error { return tx.SendBatch(context.Background(), busy).Close() }); err != nil {
		t.Fatal(err)
	}
	s.exec(t, "ALTER TABLE public.d_src ALTER COLUMN id TYPE bigint")
	s.exec(t, "ALTER TABLE public.v_src ALTER COLUMN k TYPE text")
	// The test's own session prepared its INSERTs for the old types.
	if err := s.conn.DeallocateAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	insert()
	check("after the DDL")
	if typ := columnType(t, s, "public.d_out", "id"); typ != "bigint" {
		t.Errorf("d_out.id is %s, want bigint", typ)
	}
	if typ := columnType(t, s, "public.v_out", "k"); typ != "text" {
		t.Errorf("v_out.k is %s, want text", typ)
	}

	// Re-validation: a rule edited (its backfill runs again, reading keys of
	// the new type)...
	var fingerprint string
	if err := s.conn.QueryRow(context.Background(), "SELECT fingerprint FROM pgimageai.backfills WHERE rule = 'd'").Scan(&fingerprint); err != nil {
		t.Fatal(err)
	}
	s.exec(t, "UPDATE pgimageai.rules SET prompt = 'Describe the image.' WHERE name = 'd'")
	insert()
	integration.WaitFor(t, 30*time.Second, "the edited rule's backfill", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.backfills WHERE rule = 'd' AND state = 'done' AND fingerprint <> $1", fingerprint) == 1
	})
	check("after the rule was edited")

	// ... and a restart, with rows changed while the bridge was down.
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	insert()
	_, stop = s.start(t, cfg)
	insert()
	check("after a restart")
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}

	for _, target := range []string{"public.d_out", "public.v_out"} {
		n := 0
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "target key widened to follow the source") && strings.Contains(line, "target="+target+" ") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("the widening of %s is logged %d times, want once", target, n)
		}
	}
}

// TestWidenKeyUserTarget widens a source's key whose target the user
// created: the rule is invalid_rule, its detail giving the exact statement;
// once the user ran it, the rule runs again and backfills what changed
// meanwhile. A change that is no widening (integer to text) is invalid_rule
// with a clear message, even for a target the bridge created.
func TestWidenKeyUserTarget(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.exec(t, "CREATE TABLE public.u_src (id integer PRIMARY KEY, img bytea)")
	s.exec(t, "CREATE TABLE public.u_out (id integer PRIMARY KEY, caption text)")
	s.exec(t, "CREATE TABLE public.n_src (id integer PRIMARY KEY, img bytea)")
	widenRule(t, s, "u", "public.u_src", "public.u_out")
	widenRule(t, s, "n", "public.n_src", "public.n_out")
	cfg := s.config(t)
	cfg.Timing.RecheckInterval = 300 * time.Millisecond
	_, stop := s.start(t, cfg)

	u := map[string][]byte{"1": pngImage(t, 1)}
	s.exec(t, "INSERT INTO public.u_src (id, img) VALUES (1, $1)", u["1"])
	s.exec(t, "INSERT INTO public.n_src (id, img) VALUES (1, $1)", pngImage(t, 2))
	s.sync(t, 30*time.Second)
	wantCaptions(t, s, "public.u_out", "id", u)

	s.exec(t, "ALTER TABLE public.u_src ALTER COLUMN id TYPE bigint")
	s.exec(t, "ALTER TABLE public.n_src ALTER COLUMN id TYPE text")
	u["3000000000"] = pngImage(t, 3)
	s.exec(t, "INSERT INTO public.u_src (id, img) VALUES (3000000000, $1)", u["3000000000"])
	s.exec(t, "INSERT INTO public.n_src (id, img) VALUES ('x', $1)", pngImage(t, 4))
	s.sync(t, 30*time.Second)

	detail := func(rule string) string {
		t.Helper()
		var d string
		integration.WaitFor(t, 30*time.Second, "rule "+rule+" to be invalid_rule", func() bool {
			return s.conn.QueryRow(context.Background(), `SELECT detail FROM pgimageai.errors
WHERE rule = $1 AND reason = 'invalid_rule' AND resolved_at IS NULL`, rule).Scan(&d) == nil
		})
		return d
	}
	const stmt = `ALTER TABLE "public"."u_out" ALTER COLUMN "id" TYPE bigint`
	if d := detail("u"); !strings.Contains(d, "run: "+stmt) {
		t.Errorf("invalid_rule detail %q does not give the statement %s", d, stmt)
	}
	if d := detail("n"); !strings.Contains(d, `key column "id" is integer, the source's is text`) || !strings.Contains(d, "never a narrowing or a change of kind") {
		t.Errorf("invalid_rule detail %q does not say the change is no widening", d)
	}
	if typ := columnType(t, s, "public.u_out", "id"); typ != "integer" {
		t.Errorf("the bridge altered the user's table: u_out.id is %s", typ)
	}
	if typ := columnType(t, s, "public.n_out", "id"); typ != "integer" {
		t.Errorf("the bridge converted n_out.id to %s", typ)
	}

	s.exec(t, stmt)
	integration.WaitFor(t, 30*time.Second, "rule u to be valid again", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE rule = 'u' AND reason = 'invalid_rule' AND resolved_at IS NULL") == 0
	})
	integration.WaitFor(t, 30*time.Second, "rule u's backfill", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.backfills WHERE rule = 'u' AND state = 'done'") == 1
	})
	s.sync(t, 30*time.Second)
	wantCaptions(t, s, "public.u_out", "id", u)
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}
