package integration_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/provider"
)

// TestInvalidRulesAreSkipped: each kind of invalid rule gets ONE open
// invalid_rule errors row with a message that says what is wrong, and the
// valid rule beside them keeps running.
func TestInvalidRulesAreSkipped(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.exec(t, `INSERT INTO pgimageai.models (name, provider, base_url, model) VALUES ('ftp', 'openai', 'ftp://example.invalid/v1', 'x')`)
	s.exec(t, `INSERT INTO pgimageai.models (name, provider, model, options) VALUES ('typo', 'openai', 'x', '{"max_tokenz": 5}')`)
	s.exec(t, `CREATE TABLE public.nokey (id int, img bytea)`)
	s.exec(t, `CREATE TABLE public.int_target (id int PRIMARY KEY, c integer)`)
	s.exec(t, `CREATE TABLE public.bigint_key (id bigint PRIMARY KEY, c text)`)
	s.rule(t, "good", "vision", "public.captions", "caption")
	bad := []struct{ name, sql, want string }{
		{"embed-on-openai", `INSERT INTO pgimageai.rules VALUES ('embed-on-openai', 'public.photos', 'img', 'AI_IMAGE_EMBED', 'vision', NULL, 'public.vecs', 'v')`, "does not implement image embedding"},
		{"no-table", `INSERT INTO pgimageai.rules VALUES ('no-table', 'public.nope', 'img', 'AI_IMAGE_COMPLETE', 'vision', 'p', 'public.t1', 'c')`, "no such table"},
		{"no-column", `INSERT INTO pgimageai.rules VALUES ('no-column', 'public.photos', 'Img', 'AI_IMAGE_COMPLETE', 'vision', 'p', 'public.t2', 'c')`, `no column "Img"`},
		{"not-bytea", `INSERT INTO pgimageai.rules VALUES ('not-bytea', 'public.photos', 'note', 'AI_IMAGE_COMPLETE', 'vision', 'p', 'public.t3', 'c')`, "is text, not bytea"},
		{"no-pk", `INSERT INTO pgimageai.rules VALUES ('no-pk', 'public.nokey', 'img', 'AI_IMAGE_COMPLETE', 'vision', 'p', 'public.t4', 'c')`, "has no primary key"},
		{"ftp-url", `INSERT INTO pgimageai.rules VALUES ('ftp-url', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'ftp', 'p', 'public.t5', 'c')`, "ftp"},
		{"bad-option", `INSERT INTO pgimageai.rules VALUES ('bad-option', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'typo', 'p', 'public.t6', 'c')`, "max_tokenz"},
		{"int-target", `INSERT INTO pgimageai.rules VALUES ('int-target', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'vision', 'p', 'public.int_target', 'c')`, "is integer; AI_IMAGE_COMPLETE writes text"},
		{"key-type", `INSERT INTO pgimageai.rules VALUES ('key-type', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'vision', 'p', 'public.bigint_key', 'c')`, `key column "id" is bigint, the source's is integer`},
	}
	for _, b := range bad {
		s.exec(t, b.sql)
	}
	_, stop := s.start(t, s.config(t))
	img := pngImage(t, 1)
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (1, $1)", img)
	s.sync(t, 30*time.Second)
	assertCaption(t, s, 1, captionOf(magic.DataURL(magic.PNG, img)))
	for _, b := range bad {
		var n int
		var detail, key string
		err := s.conn.QueryRow(context.Background(), `SELECT count(*) OVER (), detail, source_key::text FROM pgimageai.errors
WHERE rule = $1 AND reason = 'invalid_rule' AND resolved_at IS NULL`, b.name).Scan(&n, &detail, &key)
		if err != nil {
			t.Errorf("rule %s: no open invalid_rule row: %v", b.name, err)
			continue
		}
		if n != 1 || key != "{}" || !strings.Contains(detail, b.want) {
			t.Errorf("rule %s: %d rows, key %s, detail %q; want 1, {}, containing %q", b.name, n, key, detail, b.want)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// Restarting reports nothing new; fixing a rule resolves its row.
	s.exec(t, `UPDATE pgimageai.rules SET image_column = 'img' WHERE name = 'no-column'`)
	s.start(t, s.config(t))
	integration.WaitFor(t, 30*time.Second, "the fixed rule's errors row to be resolved", func() bool {
		return queryInt(t, s.conn, `SELECT count(*) FROM pgimageai.errors WHERE rule = 'no-column' AND resolved_at IS NOT NULL`) == 1
	})
	if n := queryInt(t, s.conn, `SELECT count(*) FROM pgimageai.errors WHERE reason = 'invalid_rule' AND resolved_at IS NULL`); n != len(bad)-1 {
		t.Errorf("%d open invalid_rule rows after the fix, want %d", n, len(bad)-1)
	}
	if n := queryInt(t, s.conn, `SELECT max(attempts) FROM pgimageai.errors WHERE reason = 'invalid_rule'`); n != 1 {
		t.Errorf("a restart bumped attempts to %d", n)
	}
}

// TestInvalidRuleRecheck: a rule on a table that does not exist yet is
// invalid_rule; once the table is created — no change to the rule — the
// bridge finds it on its next check, resolves the row, backfills the rows
// already there and streams the new ones.
func TestInvalidRuleRecheck(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('late', 'public.late_photos', 'img', 'AI_IMAGE_COMPLETE', 'vision', 'p', 'public.late_captions', 'caption')`)
	cfg := s.config(t)
	cfg.Timing.RecheckInterval = 300 * time.Millisecond
	s.start(t, cfg)
	integration.WaitFor(t, 30*time.Second, "the invalid_rule row", func() bool {
		return queryInt(t, s.conn, `SELECT count(*) FROM pgimageai.errors WHERE rule = 'late' AND reason = 'invalid_rule' AND resolved_at IS NULL`) == 1
	})

	first, second := pngImage(t, 1), pngImage(t, 2)
	s.exec(t, `CREATE TABLE public.late_photos (id int PRIMARY KEY, img bytea)`)
	s.exec(t, `INSERT INTO public.late_photos VALUES (1, $1)`, first)
	integration.WaitFor(t, 30*time.Second, "the rule to be valid", func() bool {
		return queryInt(t, s.conn, `SELECT count(*) FROM pgimageai.errors WHERE rule = 'late' AND resolved_at IS NOT NULL`) == 1
	})
	s.exec(t, `INSERT INTO public.late_photos VALUES (2, $1)`, second)
	s.sync(t, 30*time.Second)
	integration.WaitFor(t, 30*time.Second, "both results", func() bool {
		return queryInt(t, s.conn, `SELECT count(*) FROM public.late_captions WHERE caption IS NOT NULL`) == 2
	})
	for id, img := range map[int][]byte{1: first, 2: second} {
		var got string
		if err := s.conn.QueryRow(context.Background(), `SELECT caption FROM public.late_captions WHERE id = $1`, id).Scan(&got); err != nil || got != captionOf(magic.DataURL(magic.PNG, img)) {
			t.Errorf("row %d: caption %q (%v)", id, got, err)
		}
	}
	if n := ai.Count(); n != 2 {
		t.Errorf("%d provider requests, want 2", n)
	}
}

// embedder answers with a vector whose length is the image's first byte mod
// 4 plus 2: PNG (0x89) gives 3 values, JPEG (0xFF) 5.
type embedder struct{}

func (embedder) EmbedImage(_ context.Context, img provider.Image) (provider.Embedding, error) {
	n := int(img.Data[0])%4 + 2
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i+1) / 10
	}
	return provider.Embedding{Vector: v}, nil
}

// TestEmbedTargets: AI_IMAGE_EMBED writes real[] into a column it creates, and
// into an existing pgvector vector(3) column, where a vector of another
// dimension is a bad_response.
func TestEmbedTargets(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	s.exec(t, "CREATE EXTENSION IF NOT EXISTS vector")
	s.exec(t, "CREATE TABLE public.vecs (id int PRIMARY KEY, v vector(3))")
	s.exec(t, `INSERT INTO pgimageai.models (name, provider, model) VALUES ('emb', 'test-embed', 'x')`)
	s.exec(t, `INSERT INTO pgimageai.rules VALUES ('arr', 'public.photos', 'img', 'AI_IMAGE_EMBED', 'emb', NULL, 'public.arrays', 'v')`)
	s.exec(t, `INSERT INTO pgimageai.rules VALUES ('vec', 'public.photos', 'img', 'AI_IMAGE_EMBED', 'emb', NULL, 'public.vecs', 'v')`)
	cfg := s.config(t)
	cfg.Registry.Register("test-embed", func(provider.Model, provider.Env) (provider.Provider, error) { return embedder{}, nil })
	s.start(t, cfg)
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (1, $1), (2, $2)", pngImage(t, 1), jpegImage(t, 2))
	s.sync(t, 30*time.Second)

	var arrType string
	if err := s.conn.QueryRow(context.Background(), `SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'public.arrays'::regclass AND attname = 'v'`).Scan(&arrType); err != nil || arrType != "real[]" {
		t.Fatalf("created column type %q (%v), want real[]", arrType, err)
	}
	var arr []float32
	if err := s.conn.QueryRow(context.Background(), "SELECT v FROM public.arrays WHERE id = 2").Scan(&arr); err != nil || len(arr) != 5 || arr[0] != 0.1 {
		t.Fatalf("real[] result %v (%v)", arr, err)
	}
	var vec string
	if err := s.conn.QueryRow(context.Background(), "SELECT v::text FROM public.vecs WHERE id = 1").Scan(&vec); err != nil || vec != "[0.1,0.2,0.3]" {
		t.Fatalf("vector(3) result %q (%v)", vec, err)
	}
	var null *string
	var reason, detail string
	if err := s.conn.QueryRow(context.Background(), `SELECT v::text, e.reason, e.detail FROM public.vecs JOIN pgimageai.errors e
ON e.rule = 'vec' AND e.source_key = jsonb_build_object('id', vecs.id) WHERE vecs.id = 2`).Scan(&null, &reason, &detail); err != nil {
		t.Fatal(err)
	}
	if null != nil || reason != "bad_response" || !strings.Contains(detail, "5 dimensions") {
		t.Fatalf("dimension mismatch: value %v, %s: %s", null, reason, detail)
	}
}
