package integration_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/magic"
)

// TestPromptTemplate: a prompt naming columns is rendered per row; editing a
// named column alone makes exactly one new call, a named column that arrives
// as unchanged TOAST is read from the row, and an unrelated edit costs nothing.
func TestPromptTemplate(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	s.exec(t, "ALTER TABLE public.photos ADD COLUMN title text, ADD COLUMN views int")
	s.exec(t, "ALTER TABLE public.photos ALTER COLUMN note SET STORAGE EXTERNAL")
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.exec(t, `INSERT INTO pgimageai.rules VALUES ('caption', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'vision',
'Describe {{title}} given {{ note }}', 'public.captions', 'caption')`)
	s.start(t, s.config(t))
	note := strings.Repeat("long-note ", 400) // 4 KB, stored out of line
	img := pngImage(t, 1)
	s.exec(t, "INSERT INTO public.photos (id, img, title, note) VALUES (1, $1, 'a cat', $2)", img, note)
	s.sync(t, 30*time.Second)
	if got := ai.Requests(); len(got) != 1 || got[0].Prompt != "Describe a cat given "+note {
		t.Fatalf("first request prompt %q", got[0].Prompt)
	}

	s.exec(t, "UPDATE public.photos SET title = 'a dog' WHERE id = 1") // note arrives as unchanged TOAST
	s.sync(t, 30*time.Second)
	reqs := ai.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests after editing the named column, want 2", len(reqs))
	}
	if reqs[1].Prompt != "Describe a dog given "+note {
		t.Fatalf("prompt after the edit %.60q…, want the note read from the row", reqs[1].Prompt)
	}

	s.exec(t, "UPDATE public.photos SET views = 7 WHERE id = 1")
	s.sync(t, 30*time.Second)
	if n := ai.Count(); n != 2 {
		t.Fatalf("an edit of an unnamed column made a call (%d requests)", n)
	}
	assertCaption(t, s, 1, captionOf(magic.DataURL(magic.PNG, img)))

	// A TOASTed image whose row gets a new title: the image is read from
	// the row for the one new call.
	s.exec(t, "ALTER TABLE public.photos ALTER COLUMN img SET STORAGE EXTERNAL")
	big := append(pngImage(t, 2), integration.RandomBytes(t, 64<<10)...)
	s.exec(t, "INSERT INTO public.photos (id, img, title, note) VALUES (2, $1, 'a fox', 'short')", big)
	s.exec(t, "UPDATE public.photos SET title = 'a wolf' WHERE id = 2")
	s.sync(t, 30*time.Second)
	reqs = ai.Requests()
	wolf := 0
	for _, r := range reqs[2:] { // calls run concurrently: any order
		if r.Prompt == "Describe a wolf given short" && r.DataURL == magic.DataURL(magic.PNG, big) {
			wolf++
		}
	}
	if len(reqs) != 4 || wolf != 1 {
		t.Fatalf("%d requests, %d for the new title with the TOASTed image; want 4 and 1", len(reqs), wolf)
	}
}

// TestStructuredOutputAndUsage: with response_format the answers go to a jsonb
// column, an answer that is not JSON is a bad_response with its first 200
// characters, and pgimageai.usage holds the answered calls and their tokens.
func TestStructuredOutputAndUsage(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	ai := newFakeAI(t)
	bad := pngImage(t, 3)
	ai.Set(0, func(r aiRequest) (int, string) {
		if r.DataURL == magic.DataURL(magic.PNG, bad) {
			return http.StatusOK, "Sure! Here is a description: " + strings.Repeat("blah ", 80)
		}
		return http.StatusOK, fmt.Sprintf(`{"label": %q, "count": 1}`, tail(r.DataURL, 8))
	})
	s.model(t, "vision", ai, `{"response_format": {"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]}}`)
	s.rule(t, "tags", "vision", "public.tags", "tags")
	s.start(t, s.config(t))
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (1, $1), (2, $2), (3, $3)", pngImage(t, 1), pngImage(t, 2), bad)
	s.sync(t, 30*time.Second)

	var typ string
	s.conn.QueryRow(context.Background(), `SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'public.tags'::regclass AND attname = 'tags'`).Scan(&typ)
	if typ != "jsonb" {
		t.Fatalf("created column type %q, want jsonb", typ)
	}
	var label string
	if err := s.conn.QueryRow(context.Background(), "SELECT tags->>'label' FROM public.tags WHERE id = 2").Scan(&label); err != nil ||
		label != tail(magic.DataURL(magic.PNG, pngImage(t, 2)), 8) {
		t.Fatalf("jsonb result label %q (%v)", label, err)
	}
	var reason, detail string
	if err := s.conn.QueryRow(context.Background(), `SELECT reason, detail FROM pgimageai.errors WHERE source_key = '{"id": 3}'`).Scan(&reason, &detail); err != nil {
		t.Fatal(err)
	}
	if reason != "bad_response" || !strings.Contains(detail, "not valid JSON: Sure! Here is a description") || strings.Count(detail, "blah") > 40 {
		t.Fatalf("errors row %s: %s", reason, detail)
	}

	// Usage: the fake answers report 11 prompt and 5 completion tokens each;
	// the two usable answers count.
	var calls, pt, ct int
	if err := s.conn.QueryRow(context.Background(), `SELECT calls, prompt_tokens, completion_tokens FROM pgimageai.usage
WHERE rule = 'tags' AND model = 'vision' AND day = (now() AT TIME ZONE 'UTC')::date`).Scan(&calls, &pt, &ct); err != nil {
		t.Fatal(err)
	}
	if calls != 2 || pt != 22 || ct != 10 {
		t.Fatalf("usage %d calls, %d prompt, %d completion tokens; want 2, 22, 10", calls, pt, ct)
	}
}

// TestJSONTargetColumn: a structured-output rule may write into a json (not
// jsonb) column a user created. json has no equality operator, so the
// "only when the value differs" comparison is made as jsonb: the same value
// written again, and a new value, both go through — set-based writes (a
// target table of its own) and single ones (write-back into the source
// table) alike.
func TestJSONTargetColumn(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	for _, target := range []string{"public.tags", "public.photos"} {
		t.Run(target, func(t *testing.T) {
			s := newSource(t)
			ai := newFakeAI(t)
			ai.Set(0, func(r aiRequest) (int, string) {
				if r.DataURL == magic.DataURL(magic.PNG, pngImage(t, 9)) {
					return http.StatusOK, `{"label": "other"}`
				}
				return http.StatusOK, `{"label": "same"}`
			})
			if target == "public.tags" {
				s.exec(t, `CREATE TABLE public.tags (id int PRIMARY KEY, tags json)`)
			} else {
				s.exec(t, `ALTER TABLE public.photos ADD COLUMN tags json`)
			}
			s.model(t, "vision", ai, `{"response_format": {"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]}}`)
			s.rule(t, "tags", "vision", target, "tags")
			s.start(t, s.config(t))
			s.exec(t, "INSERT INTO public.photos (id, img) VALUES (1, $1), (2, $2)", pngImage(t, 1), pngImage(t, 2))
			s.sync(t, 30*time.Second)
			// A new image with the same answer (the value written again),
			// and one with another answer.
			s.exec(t, "UPDATE public.photos SET img = $1 WHERE id = 1", pngImage(t, 3))
			s.exec(t, "UPDATE public.photos SET img = $1 WHERE id = 2", pngImage(t, 9))
			s.sync(t, 30*time.Second)
			got := map[int]string{}
			rows, _ := s.conn.Query(context.Background(), "SELECT id, tags->>'label' FROM "+target+" ORDER BY id")
			for rows.Next() {
				var id int
				var label string
				if err := rows.Scan(&id, &label); err != nil {
					t.Fatal(err)
				}
				got[id] = label
			}
			if rows.Err() != nil || got[1] != "same" || got[2] != "other" || len(got) != 2 {
				t.Fatalf("json results %v (%v), want 1: same, 2: other", got, rows.Err())
			}
			if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE resolved_at IS NULL"); n != 0 {
				t.Fatalf("%d open errors", n)
			}
		})
	}
}

// TestNullImageNullResult: a NULL image gives a NULL result and no call — a
// row inserted with a NULL image gets its target row with a NULL caption,
// and an image set to NULL replaces the caption with NULL — with no errors
// row.
func TestNullImageNullResult(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.exec(t, `INSERT INTO pgimageai.rules VALUES ('caption', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'vision', 'Describe.', 'public.captions', 'caption')`)
	s.start(t, s.config(t))
	img := pngImage(t, 1)
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (1, $1), (2, NULL)", img)
	s.sync(t, 30*time.Second)
	assertCaptions(t, captions(t, s.conn), map[int]string{1: captionOf(magic.DataURL(magic.PNG, img)), 2: "<NULL>"})
	s.exec(t, "UPDATE public.photos SET img = NULL WHERE id = 1")
	s.sync(t, 30*time.Second)
	assertCaptions(t, captions(t, s.conn), map[int]string{1: "<NULL>", 2: "<NULL>"})
	if n := ai.Count(); n != 1 {
		t.Errorf("%d provider calls, want 1: a NULL image makes none", n)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors"); n != 0 {
		t.Errorf("%d errors rows for NULL images, want 0", n)
	}
}
