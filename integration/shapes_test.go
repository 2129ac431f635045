package integration_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/internal/pgerr"
	"github.com/pgimageai/pgimageai/magic"
)

// Source tables of the shapes applications have: keyed by their replica
// identity (primary key, USING INDEX, FULL), domains over bytea, and tables
// whose identity carries no key, which are never published.

// shapeRule inserts an AI_IMAGE_COMPLETE rule on table's image column.
func (s *source) shapeRule(t testing.TB, name, table, column, target string) {
	t.Helper()
	s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ($1, $2, $3, 'AI_IMAGE_COMPLETE', 'vision', 'Describe the image', $4, 'caption')`, name, table, column, target)
}

// invalidDetail returns the detail of rule's open invalid_rule row, "" when
// there is none.
func invalidDetail(t testing.TB, s *source, rule string) string {
	t.Helper()
	var detail string
	err := s.conn.QueryRow(context.Background(), `SELECT detail FROM pgimageai.errors
WHERE rule = $1 AND reason = 'invalid_rule' AND resolved_at IS NULL`, rule).Scan(&detail)
	if errors.Is(err, pgx.ErrNoRows) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return detail
}

// keyed reads a target's captions by its text key column.
func keyed(t testing.TB, s *source, table, key string) map[string]string {
	t.Helper()
	rows, err := s.conn.Query(context.Background(), fmt.Sprintf("SELECT %s::text, coalesce(caption, '<NULL>') FROM %s",
		pgx.Identifier{key}.Sanitize(), table))
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var kv [2]string
		err := r.Scan(&kv[0], &kv[1])
		return kv, err
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range got {
		out[kv[0]] = kv[1]
	}
	return out
}

// primaryKey returns the primary key columns of table, in key order.
func primaryKey(t testing.TB, s *source, table string) string {
	t.Helper()
	var cols string
	if err := s.conn.QueryRow(context.Background(), `SELECT string_agg(a.attname, ',' ORDER BY k.ord)
FROM pg_index i CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
WHERE i.indrelid = $1::regclass AND i.indisprimary`, table).Scan(&cols); err != nil {
		t.Fatal(err)
	}
	return cols
}

// writeWorks runs the application's UPDATE and DELETE on a row of table
// (keyed by id) and returns the first error.
func writeWorks(s *source, table string) error {
	ctx := context.Background()
	if _, err := s.conn.Exec(ctx, fmt.Sprintf("UPDATE %s SET img = img WHERE id = 1", table)); err != nil {
		return fmt.Errorf("UPDATE %s: %w", table, err)
	}
	if _, err := s.conn.Exec(ctx, fmt.Sprintf("DELETE FROM %s WHERE id = 2", table)); err != nil {
		return fmt.Errorf("DELETE FROM %s: %w", table, err)
	}
	return nil
}

// TestShapesUnkeyedNeverBreakWrites: rules on a table with REPLICA IDENTITY
// NOTHING, on one without a primary key or identity index, on one whose
// only unique index is not its identity, and on a partitioned table one of
// whose partitions has REPLICA IDENTITY NOTHING are invalid_rule naming the
// ALTER TABLE that fixes each — and the application's UPDATE and DELETE on them
// still work (published, PostgreSQL refuses them: SQLSTATE 55000). A
// followed table whose identity is made NOTHING later leaves the
// publication within the re-validation interval: the application's UPDATE
// works again and the rule is reported.
func TestShapesUnkeyedNeverBreakWrites(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.exec(t, `CREATE TABLE public.nothing (id int PRIMARY KEY, img bytea);
ALTER TABLE public.nothing REPLICA IDENTITY NOTHING;
CREATE TABLE public.nokey (id int, img bytea);
CREATE TABLE public.uniq (id int NOT NULL, img bytea);
CREATE UNIQUE INDEX uniq_id ON public.uniq (id);
CREATE TABLE public.parted (id int PRIMARY KEY, img bytea) PARTITION BY RANGE (id);
CREATE TABLE public.parted_low PARTITION OF public.parted FOR VALUES FROM (0) TO (2);
CREATE TABLE public.parted_high PARTITION OF public.parted FOR VALUES FROM (2) TO (100);
ALTER TABLE public.parted_high REPLICA IDENTITY NOTHING;
CREATE TABLE public.followed (id int PRIMARY KEY, img bytea)`)
	for _, table := range []string{"nothing", "nokey", "uniq", "parted", "followed"} {
		s.exec(t, fmt.Sprintf("INSERT INTO public.%s (id, img) VALUES (1, $1), (2, $2), (3, $3)", table),
			pngImage(t, 1), pngImage(t, 2), pngImage(t, 3))
		s.shapeRule(t, table, "public."+table, "img", "public."+table+"_out")
	}
	const interval = 2 * time.Second
	cfg := s.config(t)
	cfg.Timing.RevalidateInterval = interval
	s.start(t, cfg)

	fixes := map[string]string{
		"nothing": "its replica identity is NOTHING, so its changes carry no key to match results by; run: ALTER TABLE public.nothing REPLICA IDENTITY DEFAULT",
		"nokey":   "it has no primary key and its replica identity is DEFAULT, so its changes carry no key to match results by; run: ALTER TABLE public.nokey ADD PRIMARY KEY (",
		"uniq":    "run: ALTER TABLE public.uniq REPLICA IDENTITY USING INDEX uniq_id",
		"parted":  "its partition public.parted_high has a replica identity that carries no key",
	}
	for rule, want := range fixes {
		if got := invalidDetail(t, s, rule); !strings.Contains(got, want) {
			t.Errorf("rule %s: invalid_rule %q, want it to say %q", rule, got, want)
		}
		if err := writeWorks(s, "public."+rule); err != nil {
			t.Errorf("the application's write failed (SQLSTATE %s): %v", pgerr.SQLState(err), err)
		}
	}
	integration.WaitFor(t, 30*time.Second, "the followed table's backfill", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.backfills WHERE rule = 'followed' AND state = 'done'") == 1
	})
	if err := writeWorks(s, "public.followed"); err != nil {
		t.Fatal(err)
	}

	s.exec(t, "ALTER TABLE public.followed REPLICA IDENTITY NOTHING")
	altered := time.Now()
	var failed int
	for {
		_, err := s.conn.Exec(context.Background(), "UPDATE public.followed SET img = img WHERE id = 1")
		if err == nil {
			break
		}
		if pgerr.SQLState(err) != "55000" {
			t.Fatalf("UPDATE: %v", err)
		}
		failed++
		if time.Since(altered) > interval+5*time.Second {
			t.Fatalf("the application's UPDATE still fails %s after its table's identity was made NOTHING (re-validation interval %s): %v",
				time.Since(altered).Round(time.Millisecond), interval, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the application's UPDATE works again %s after REPLICA IDENTITY NOTHING (%d refused meanwhile; interval %s)",
		time.Since(altered).Round(time.Millisecond), failed, interval)
	if _, err := s.conn.Exec(context.Background(), "DELETE FROM public.followed WHERE id = 3"); err != nil {
		t.Errorf("DELETE: %v", err)
	}
	integration.WaitFor(t, 30*time.Second, "the followed rule's invalid_rule row", func() bool {
		return strings.Contains(invalidDetail(t, s, "followed"), "REPLICA IDENTITY DEFAULT")
	})
}

// TestShapesReplicaIdentityKeys: a table keyed only by a unique index (its
// USING INDEX identity, no primary key), a table with a primary key whose
// identity is another unique index, and a REPLICA IDENTITY FULL table with a
// primary key: each target is keyed by the identity's columns (FULL: the
// primary key); a DELETE removes its target row and a key change moves it,
// without a new call.
func TestShapesReplicaIdentityKeys(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.exec(t, `CREATE TABLE public.coded (code text NOT NULL, img bytea, note text);
CREATE UNIQUE INDEX coded_code ON public.coded (code);
ALTER TABLE public.coded REPLICA IDENTITY USING INDEX coded_code;
CREATE TABLE public.both_keys (id int PRIMARY KEY, code text NOT NULL, img bytea);
CREATE UNIQUE INDEX both_code ON public.both_keys (code);
ALTER TABLE public.both_keys REPLICA IDENTITY USING INDEX both_code;
CREATE TABLE public.full_pk (id int PRIMARY KEY, img bytea, note text);
ALTER TABLE public.full_pk REPLICA IDENTITY FULL`)
	s.shapeRule(t, "coded", "public.coded", "img", "public.coded_out")
	s.shapeRule(t, "both", "public.both_keys", "img", "public.both_out")
	s.shapeRule(t, "full", "public.full_pk", "img", "public.full_out")
	s.start(t, s.config(t))
	for _, rule := range []string{"coded", "both", "full"} {
		if d := invalidDetail(t, s, rule); d != "" {
			t.Fatalf("rule %s is invalid: %s", rule, d)
		}
	}
	img := func(n int) string { return captionOf(magic.DataURL(magic.PNG, pngImage(t, n))) }
	s.exec(t, "INSERT INTO public.coded (code, img) VALUES ('a', $1), ('b', $2)", pngImage(t, 1), pngImage(t, 2))
	s.exec(t, "INSERT INTO public.both_keys (id, code, img) VALUES (1, 'a', $1), (2, 'b', $2)", pngImage(t, 3), pngImage(t, 4))
	s.exec(t, "INSERT INTO public.full_pk (id, img) VALUES (1, $1), (2, $2)", pngImage(t, 5), pngImage(t, 6))
	s.sync(t, 30*time.Second)
	for table, want := range map[string]string{"public.coded_out": "code", "public.both_out": "code", "public.full_out": "id"} {
		if got := primaryKey(t, s, table); got != want {
			t.Errorf("%s is keyed by (%s), want (%s)", table, got, want)
		}
	}
	assertKeyed := func(table, key string, want map[string]string) {
		t.Helper()
		got := keyed(t, s, table, key)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s = %v, want %v", table, got, want)
		}
	}
	assertKeyed("public.coded_out", "code", map[string]string{"a": img(1), "b": img(2)})
	assertKeyed("public.both_out", "code", map[string]string{"a": img(3), "b": img(4)})
	assertKeyed("public.full_out", "id", map[string]string{"1": img(5), "2": img(6)})
	calls := ai.Count()
	// An errors row names the row by the identity's key.
	s.exec(t, "INSERT INTO public.coded (code, img) VALUES ('e', ''::bytea)")
	s.sync(t, 30*time.Second)
	var sourceKey string
	if err := s.conn.QueryRow(context.Background(), "SELECT source_key::text FROM pgimageai.errors WHERE rule = 'coded' AND reason = 'empty_image'").Scan(&sourceKey); err != nil {
		t.Fatal(err)
	}
	if sourceKey != `{"code": "e"}` {
		t.Errorf("source_key %s, want {\"code\": \"e\"}", sourceKey)
	}

	s.exec(t, "DELETE FROM public.coded WHERE code = 'a'")
	s.exec(t, "UPDATE public.coded SET code = 'c' WHERE code = 'b'")
	s.exec(t, "DELETE FROM public.both_keys WHERE id = 1")
	s.exec(t, "UPDATE public.both_keys SET code = 'z' WHERE id = 2")
	s.exec(t, "DELETE FROM public.full_pk WHERE id = 1")
	s.exec(t, "UPDATE public.full_pk SET id = 3 WHERE id = 2")
	s.exec(t, "UPDATE public.full_pk SET note = 'x' WHERE id = 3")
	s.sync(t, 30*time.Second)
	assertKeyed("public.coded_out", "code", map[string]string{"c": img(2), "e": "<NULL>"})
	assertKeyed("public.both_out", "code", map[string]string{"z": img(4)})
	assertKeyed("public.full_out", "id", map[string]string{"3": img(6)})
	if n := ai.Count() - calls; n != 0 {
		t.Errorf("%d calls for deletes, key moves and an unchanged image, want 0", n)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE resolved_at IS NULL AND reason <> 'empty_image'"); n != 0 {
		t.Errorf("%d open errors rows, want 0", n)
	}
}

// TestShapesDomainOverBytea: an image column of a domain over a domain over
// bytea is followed like bytea.
func TestShapesDomainOverBytea(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.exec(t, `CREATE DOMAIN public.photo AS bytea;
CREATE DOMAIN public.framed AS public.photo CHECK (length(VALUE) > 0);
CREATE TABLE public.album (id int PRIMARY KEY, pic public.framed)`)
	s.exec(t, "INSERT INTO public.album VALUES (1, $1)", pngImage(t, 1))
	s.shapeRule(t, "album", "public.album", "pic", "public.album_out")
	s.start(t, s.config(t))
	s.exec(t, "INSERT INTO public.album VALUES (2, $1)", pngImage(t, 2))
	s.sync(t, 30*time.Second)
	if d := invalidDetail(t, s, "album"); d != "" {
		t.Fatalf("rule is invalid: %s", d)
	}
	integration.WaitFor(t, 30*time.Second, "both rows' captions", func() bool {
		got := keyed(t, s, "public.album_out", "id")
		return got["1"] == captionOf(magic.DataURL(magic.PNG, pngImage(t, 1))) && got["2"] == captionOf(magic.DataURL(magic.PNG, pngImage(t, 2)))
	})
}

// TestShapesIdentityChangeUnderRule: a running rule's table changes its
// replica identity from the primary key to a unique index. Its target, keyed
// by the old key, is reported (invalid_rule saying what to do) while the
// application's writes go on — with a column list (ReadColumnsOnly), which
// PostgreSQL requires to hold the new identity's columns (SQLSTATE 42P10),
// within the re-validation interval; once the target is dropped, the bridge
// creates it keyed by the new identity and backfills it.
func TestShapesIdentityChangeUnderRule(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.exec(t, `CREATE TABLE public.swap (id int PRIMARY KEY, code text NOT NULL, img bytea);
CREATE UNIQUE INDEX swap_code ON public.swap (code)`)
	s.exec(t, "INSERT INTO public.swap VALUES (1, 'a', $1)", pngImage(t, 1))
	s.shapeRule(t, "swap", "public.swap", "img", "public.swap_out")
	cfg := s.config(t)
	cfg.Timing.RevalidateInterval, cfg.Timing.RecheckInterval = time.Second, time.Second
	cfg.Limits.ReadColumnsOnly = true
	s.start(t, cfg)
	integration.WaitFor(t, 30*time.Second, "the backfill", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM public.swap_out WHERE caption IS NOT NULL") == 1
	})

	s.exec(t, "ALTER TABLE public.swap REPLICA IDENTITY USING INDEX swap_code")
	altered := time.Now()
	for {
		_, err := s.conn.Exec(context.Background(), "UPDATE public.swap SET img = img WHERE id = 1")
		if err == nil {
			break
		}
		if time.Since(altered) > 10*time.Second {
			t.Fatalf("the application's UPDATE still fails 10s after the identity change: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	integration.WaitFor(t, 30*time.Second, "the rule's invalid_rule row", func() bool {
		return strings.Contains(invalidDetail(t, s, "swap"), "its primary key (id) must be the source's key columns (code)")
	})
	s.exec(t, "DROP TABLE public.swap_out")
	integration.WaitFor(t, 30*time.Second, "the target keyed by the new identity, backfilled", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM information_schema.columns WHERE table_name = 'swap_out' AND column_name = 'caption'") == 1 &&
			keyed(t, s, "public.swap_out", "code")["a"] == captionOf(magic.DataURL(magic.PNG, pngImage(t, 1)))
	})
	if got := primaryKey(t, s, "public.swap_out"); got != "code" {
		t.Errorf("target keyed by (%s), want (code)", got)
	}
	if d := invalidDetail(t, s, "swap"); d != "" {
		t.Errorf("rule still invalid: %s", d)
	}
}

// TestShapesHugeUnreadColumn: with --publish-columns read, a row whose
// column that no rule reads holds 300 MB (a few MB on disk, compressed)
// never reaches the bridge — the publication's column list carries only the
// key, the image and the template's columns — so `pgimageai run` stays
// within its byte budget + 64 MiB of peak RSS, and the row gets its result.
// Without the column list the value is decoded and sent whole (about 600 MB
// of RSS).
func TestShapesHugeUnreadColumn(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.exec(t, `ALTER TABLE public.photos ADD COLUMN title text`)
	s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('caption', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'vision', 'Describe {{title}}', 'public.captions', 'caption')`)
	const budget = 256 << 20 // the default
	p := s.runProcess(t, "PGIMAGEAI_PUBLISH_COLUMNS=read")
	var cols []string
	if err := s.conn.QueryRow(context.Background(), `SELECT attnames FROM pg_publication_tables
WHERE pubname = $1 AND schemaname = 'public' AND tablename = 'photos'`, s.slot).Scan(&cols); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cols, ","); got != "id,img,title" {
		t.Errorf("the publication carries (%s) of public.photos, want (id,img,title)", got)
	}
	s.exec(t, `INSERT INTO public.photos (id, img, title, note) VALUES (1, $1, 'a cat', repeat('x', 300000000))`, pngImage(t, 1))
	s.sync(t, 5*time.Minute)
	rss := vmHWM(t, p.cmd.Process.Pid)
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Errorf("stop: %v", err)
	}
	assertCaptions(t, captions(t, s.conn), map[int]string{1: captionOf(magic.DataURL(magic.PNG, pngImage(t, 1)))})
	t.Logf("peak RSS %.1f MiB after a row with 300 MB in a column no rule reads (budget 256 MiB)", float64(rss)/(1<<20))
	if rss > budget+64<<20 {
		t.Errorf("peak RSS %d MiB > budget + 64 MiB", rss>>20)
	}
}

// TestShapesColumnListFollowsRules: with ReadColumnsOnly the publication's
// column list of a source table follows its rules: a prompt template that
// names another column adds it at the rule's commit, a second rule adds its
// image column, and the table leaves the publication with its last rule;
// the configuration tables stay whole.
func TestShapesColumnListFollowsRules(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.exec(t, `ALTER TABLE public.photos ADD COLUMN thumb bytea, ADD COLUMN extra text`)
	s.shapeRule(t, "caption", "public.photos", "img", "public.captions")
	cfg := s.config(t)
	cfg.Limits.ReadColumnsOnly = true
	s.start(t, cfg)
	columns := func(table string) string {
		var cols *string
		err := s.conn.QueryRow(context.Background(), `SELECT array_to_string(attnames, ',') FROM pg_publication_tables
WHERE pubname = $1 AND schemaname || '.' || tablename = $2`, s.slot, table).Scan(&cols)
		if errors.Is(err, pgx.ErrNoRows) {
			return "<not published>"
		}
		if err != nil {
			t.Fatal(err)
		}
		return *cols
	}
	wait := func(table, want string) {
		t.Helper()
		s.sync(t, 30*time.Second)
		integration.WaitFor(t, 30*time.Second, fmt.Sprintf("%s published as (%s)", table, want), func() bool { return columns(table) == want })
	}
	wait("public.photos", "id,img")
	s.exec(t, `UPDATE pgimageai.rules SET prompt = 'Describe {{note}}' WHERE name = 'caption'`)
	wait("public.photos", "id,img,note")
	s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('thumb', 'public.photos', 'thumb', 'AI_IMAGE_COMPLETE', 'vision', 'Describe', 'public.captions', 'thumb_caption')`)
	wait("public.photos", "id,img,note,thumb")
	if got := columns("pgimageai.rules"); !strings.Contains(got, "source_table") || !strings.Contains(got, "enabled") {
		t.Errorf("pgimageai.rules published as (%s), want every column", got)
	}
	s.exec(t, `DELETE FROM pgimageai.rules`)
	wait("public.photos", "<not published>")
}

// TestShapesWriteBackUsingIndex: a write-back rule on a table keyed only by
// its USING INDEX identity (no primary key) writes each row's result into
// the row itself.
func TestShapesWriteBackUsingIndex(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.exec(t, `CREATE TABLE public.wb (code text NOT NULL, img bytea, caption text);
CREATE UNIQUE INDEX wb_code ON public.wb (code);
ALTER TABLE public.wb REPLICA IDENTITY USING INDEX wb_code`)
	s.exec(t, "INSERT INTO public.wb (code, img) VALUES ('a', $1)", pngImage(t, 1))
	s.shapeRule(t, "wb", "public.wb", "img", "public.wb")
	s.start(t, s.config(t))
	s.exec(t, "INSERT INTO public.wb (code, img) VALUES ('b', $1)", pngImage(t, 2))
	s.sync(t, 30*time.Second)
	if d := invalidDetail(t, s, "wb"); d != "" {
		t.Fatalf("rule is invalid: %s", d)
	}
	want := map[string]string{"a": captionOf(magic.DataURL(magic.PNG, pngImage(t, 1))), "b": captionOf(magic.DataURL(magic.PNG, pngImage(t, 2)))}
	integration.WaitFor(t, 30*time.Second, "both rows' captions", func() bool { return fmt.Sprint(keyed(t, s, "public.wb", "code")) == fmt.Sprint(want) })
}

// TestShapesIdentityMadeFull: REPLICA IDENTITY FULL on a followed table with
// a primary key keeps its rule running — still keyed by the primary key, no
// invalid_rule, no backfill again — and its deletes and updates follow.
func TestShapesIdentityMadeFull(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (1, $1), (2, $2)", pngImage(t, 1), pngImage(t, 2))
	s.shapeRule(t, "caption", "public.photos", "img", "public.captions")
	cfg := s.config(t)
	cfg.Timing.RevalidateInterval, cfg.Timing.RecheckInterval = time.Second, time.Second
	s.start(t, cfg)
	integration.WaitFor(t, 30*time.Second, "the backfill", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.backfills WHERE rule = 'caption' AND state = 'done'") == 1
	})
	calls := ai.Count()
	s.exec(t, "ALTER TABLE public.photos REPLICA IDENTITY FULL")
	s.exec(t, "UPDATE public.photos SET note = 'x' WHERE id = 1")
	time.Sleep(3 * time.Second) // past a re-validation and a re-check
	s.exec(t, "DELETE FROM public.photos WHERE id = 2")
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (3, $1)", pngImage(t, 3))
	s.sync(t, 30*time.Second)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE rule = 'caption'"); n != 0 {
		t.Errorf("%d errors rows for the rule, want none (detail: %q)", n, invalidDetail(t, s, "caption"))
	}
	assertCaptions(t, captions(t, s.conn), map[int]string{1: captionOf(magic.DataURL(magic.PNG, pngImage(t, 1))), 3: captionOf(magic.DataURL(magic.PNG, pngImage(t, 3)))})
	if n := ai.Count() - calls; n != 1 {
		t.Errorf("%d calls after REPLICA IDENTITY FULL, want 1 (the new row's)", n)
	}
}
