package integration_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/magic"
)

// TestLiveRuleBackfill adds a rule while the bridge streams: the rows that
// already exist are backfilled, rows updated during the backfill end with
// their newest value, and new rows stream in.
func TestLiveRuleBackfill(t *testing.T) {
	s := newSource(t)
	ai := newFakeAI(t)
	ai.Set(10*time.Millisecond, nil)
	s.model(t, "vision", ai, `{"max_concurrency": 4}`)
	want := map[int]string{}
	insertRows(t, s, 1, 601, 50, want) // before the bridge and the slot exist
	s.start(t, s.config(t))
	s.rule(t, "caption", "vision", "public.captions", "caption")
	// While the backfill runs: update the images of some rows, add new rows.
	integration.WaitFor(t, 30*time.Second, "the backfill to start", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.backfills WHERE rule = 'caption'") == 1
	})
	for id := 1; id <= 600; id += 12 {
		img := pngImage(t, 10000+id)
		s.exec(t, "UPDATE public.photos SET img = $1 WHERE id = $2", img, id)
		want[id] = captionOf(magic.DataURL(magic.PNG, img))
	}
	insertRows(t, s, 601, 701, 20, want)
	integration.WaitFor(t, 120*time.Second, "the backfill to finish", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.backfills WHERE rule = 'caption' AND state = 'done'") == 1
	})
	s.sync(t, 60*time.Second)
	assertCaptions(t, captions(t, s.conn), want)
	if n := queryInt(t, s.conn, "SELECT rows_done FROM pgimageai.backfills WHERE rule = 'caption'"); n < 600 {
		t.Errorf("backfill counted %d rows, want >= 600", n)
	}
	// Identical work is done once: at most one request per distinct image.
	seen := map[string]int{}
	for _, r := range ai.Requests() {
		seen[r.DataURL]++
	}
	for url, n := range seen {
		if n > 1 {
			t.Errorf("image %s requested %d times", tail(url, 12), n)
		}
	}
}

// TestLiveConfigChanges: a disabled rule stops calling, a model's changed
// options are used by the next call, an invalid rule added live is reported
// and does not stop the valid one, and a re-enabled rule backfills.
func TestLiveConfigChanges(t *testing.T) {
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	s.start(t, s.config(t))

	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (1, $1)", pngImage(t, 1))
	s.sync(t, 30*time.Second)
	if ai.Count() != 1 || ai.Requests()[0].Body["max_tokens"] != nil {
		t.Fatalf("first request: %d requests, body %v", ai.Count(), ai.Requests()[0].Body)
	}

	// Options changed live: the next call carries them.
	s.exec(t, `UPDATE pgimageai.models SET options = '{"max_tokens": 42}' WHERE name = 'vision'`)
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (2, $1)", pngImage(t, 2))
	s.sync(t, 30*time.Second)
	if got := ai.Requests()[1].Body["max_tokens"]; got != float64(42) {
		t.Fatalf("after the options change, max_tokens = %v, want 42", got)
	}

	// An invalid rule added live: reported once, the valid rule keeps going.
	s.exec(t, `INSERT INTO pgimageai.rules VALUES ('broken', 'public.photos', 'note', 'AI_IMAGE_COMPLETE', 'vision', 'p', 'public.broken', 'c')`)
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (3, $1)", pngImage(t, 3))
	s.sync(t, 30*time.Second)
	assertCaption(t, s, 3, captionOf(magic.DataURL(magic.PNG, pngImage(t, 3))))
	if n := queryInt(t, s.conn, `SELECT count(*) FROM pgimageai.errors WHERE rule = 'broken' AND reason = 'invalid_rule' AND resolved_at IS NULL`); n != 1 {
		t.Fatalf("%d open invalid_rule rows for the broken rule, want 1", n)
	}

	// Disabled: no more calls; its invalid sibling deleted: resolved.
	s.exec(t, `UPDATE pgimageai.rules SET enabled = false WHERE name = 'caption'`)
	s.exec(t, `DELETE FROM pgimageai.rules WHERE name = 'broken'`)
	before := ai.Count()
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (4, $1)", pngImage(t, 4))
	s.sync(t, 30*time.Second)
	if ai.Count() != before {
		t.Fatalf("a disabled rule made %d requests", ai.Count()-before)
	}
	if n := queryInt(t, s.conn, `SELECT count(*) FROM pgimageai.errors WHERE rule = 'broken' AND resolved_at IS NULL`); n != 0 {
		t.Fatalf("the deleted rule's invalid_rule row is still open")
	}

	// Re-enabled: the row inserted while it was off is backfilled.
	s.exec(t, `UPDATE pgimageai.rules SET enabled = true WHERE name = 'caption'`)
	integration.WaitFor(t, 30*time.Second, "row 4 to be backfilled", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM public.captions WHERE id = 4 AND caption IS NOT NULL") == 1
	})
}

// TestWriteBack fills products.caption from products.photo: the bridge's own
// writes cause no new calls and the stream goes quiet.
func TestWriteBack(t *testing.T) {
	s := newSource(t)
	s.exec(t, "CREATE TABLE public.products (id int PRIMARY KEY, photo bytea, caption text)")
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.exec(t, `INSERT INTO pgimageai.rules VALUES ('wb', 'public.products', 'photo', 'AI_IMAGE_COMPLETE', 'vision', 'Describe', 'public.products', 'caption')`)
	s.start(t, s.config(t))
	imgs := map[int][]byte{}
	for id := 1; id <= 20; id++ {
		imgs[id] = pngImage(t, id)
		s.exec(t, "INSERT INTO public.products (id, photo) VALUES ($1, $2)", id, imgs[id])
	}
	s.sync(t, 30*time.Second)
	s.sync(t, 30*time.Second) // the write-back transactions themselves, read back
	if ai.Count() != 20 {
		t.Fatalf("%d requests for 20 rows", ai.Count())
	}
	for id, img := range imgs {
		var c *string
		s.conn.QueryRow(context.Background(), "SELECT caption FROM public.products WHERE id = $1", id).Scan(&c)
		if c == nil || *c != captionOf(magic.DataURL(magic.PNG, img)) {
			t.Fatalf("row %d caption %v", id, c)
		}
	}
	// Quiet: the slot keeps up with no new requests.
	time.Sleep(500 * time.Millisecond)
	s.sync(t, 30*time.Second)
	if ai.Count() != 20 {
		t.Fatalf("the stream did not go quiet: %d requests", ai.Count())
	}
	// A new photo: one call, the caption follows; a delete stays deleted.
	s.exec(t, "UPDATE public.products SET photo = $1 WHERE id = 1", jpegImage(t, 1))
	s.exec(t, "DELETE FROM public.products WHERE id = 2")
	s.sync(t, 30*time.Second)
	s.sync(t, 30*time.Second)
	if ai.Count() != 21 {
		t.Fatalf("%d requests after one photo change, want 21", ai.Count())
	}
	var c string
	s.conn.QueryRow(context.Background(), "SELECT caption FROM public.products WHERE id = 1").Scan(&c)
	if c != captionOf(magic.DataURL(magic.JPEG, jpegImage(t, 1))) {
		t.Fatalf("caption after the photo change: %q", c)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.products WHERE id = 2"); n != 0 {
		t.Fatal("the deleted product came back")
	}
}

// TestRetry: a row that failed (a 4xx: an answer about the row, not an
// outage, which parks rows and heals by itself) is reprocessed by a retry
// request once the provider answers it, and its errors row is resolved.
func TestRetry(t *testing.T) {
	s := newSource(t)
	ai := newFakeAI(t)
	ai.Set(0, func(aiRequest) (int, string) { return http.StatusBadRequest, "image refused for now" })
	s.model(t, "vision", ai, `{"max_retries": 0}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	s.start(t, s.config(t))
	img := pngImage(t, 7)
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (7, $1), (8, $2)", img, pngImage(t, 8))
	s.sync(t, 30*time.Second)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE reason = 'provider_error' AND resolved_at IS NULL"); n != 2 {
		t.Fatalf("%d open provider errors, want 2", n)
	}
	ai.Set(0, nil)
	s.exec(t, "DELETE FROM public.photos WHERE id = 8") // gone before the retry: resolved, not called
	before := ai.Count()
	s.exec(t, `INSERT INTO pgimageai.retry_requests (reason) VALUES ('provider_error')`)
	s.sync(t, 30*time.Second)
	assertCaption(t, s, 7, captionOf(magic.DataURL(magic.PNG, img)))
	if ai.Count()-before != 1 {
		t.Fatalf("retry made %d requests, want 1", ai.Count()-before)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE resolved_at IS NULL"); n != 0 {
		var details []string
		rows, _ := s.conn.Query(context.Background(), "SELECT rule || ' ' || source_key::text || ' ' || reason FROM pgimageai.errors WHERE resolved_at IS NULL")
		for rows.Next() {
			var d string
			rows.Scan(&d)
			details = append(details, d)
		}
		t.Fatalf("%d errors still open after the retry: %s", n, strings.Join(details, "; "))
	}
}

// TestRetryManyRows: a retry of 450 failed rows reads them in pages of 200
// (one chunk of keys) and reprocesses every one of them.
func TestRetryManyRows(t *testing.T) {
	s := newSource(t)
	ai := newFakeAI(t)
	ai.Set(0, func(aiRequest) (int, string) { return http.StatusBadRequest, "image refused for now" })
	s.model(t, "vision", ai, `{"max_retries": 0, "max_concurrency": 16}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	_, stop := s.start(t, s.config(t))
	want := map[int]string{}
	insertRows(t, s, 1, 451, 150, want)
	s.sync(t, 60*time.Second)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE resolved_at IS NULL"); n != 450 {
		t.Fatalf("%d open errors, want 450", n)
	}
	ai.Set(0, nil)
	s.exec(t, `INSERT INTO pgimageai.retry_requests DEFAULT VALUES`)
	s.sync(t, 60*time.Second)
	assertCaptions(t, captions(t, s.conn), want)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE resolved_at IS NULL"); n != 0 {
		t.Errorf("%d errors still open after the retry", n)
	}
	if err := stop(); err != nil {
		t.Error(err)
	}
}
