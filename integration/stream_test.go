package integration_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/magic"
)

// TestFunctionTableEndToEnd drives every row of the function semantics through the WAL, the
// bridge and the openai provider (an httptest server) into the target table.
func TestFunctionTableEndToEnd(t *testing.T) {
	s := newSource(t)
	ai := newFakeAI(t)
	bad400 := pngImage(t, 400)
	bad503 := pngImage(t, 503)
	ai.Set(0, func(r aiRequest) (int, string) {
		switch r.DataURL {
		case magic.DataURL(magic.PNG, bad400):
			return http.StatusBadRequest, "image could not be decoded"
		case magic.DataURL(magic.PNG, bad503):
			return http.StatusServiceUnavailable, "overloaded"
		}
		return http.StatusOK, captionOf(r.DataURL)
	})
	s.model(t, "vision", ai, `{"max_retries": 1, "timeout": "5s"}`)
	s.model(t, "strict", ai, `{"max_image_bytes": 60, "formats": ["image/png"]}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	s.rule(t, "strict", "strict", "public.strict", "caption")
	_, stop := s.start(t, s.config(t))

	type row struct {
		id     int
		img    []byte // nil = NULL
		format magic.Format
		reason string // "" = a caption; "-" = NULL without error
	}
	rows := []row{
		{1, pngImage(t, 1), magic.PNG, ""},
		{2, jpegImage(t, 2), magic.JPEG, ""},
		{3, gifImage(t, 3, true), magic.GIF, ""},
		{4, gifImage(t, 4, false), magic.GIF, ""},
		{5, webpImage(5), magic.WebP, ""},
		{6, nil, 0, "-"},
		{7, []byte{}, 0, "empty_image"},
		{8, []byte("this is not an image, just text"), 0, "unknown_format"},
		{9, []byte("RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00"), 0, "unknown_format"},
		{10, bad400, magic.PNG, "provider_error"},
		{11, bad503, magic.PNG, "provider_error"},
	}
	if !bytes.HasPrefix(rows[2].img, []byte("GIF87a")) || !bytes.HasPrefix(rows[3].img, []byte("GIF89a")) {
		t.Fatal("test GIFs lack their versions")
	}
	for _, r := range rows {
		s.exec(t, "INSERT INTO public.photos (id, img) VALUES ($1, $2)", r.id, r.img)
	}
	s.sync(t, 60*time.Second)

	// Requests: one per image with a known format, two for the 503 row
	// (max_retries 1), none for NULL, empty, garbage or WAVE.
	reqs := ai.Requests()
	byURL := map[string]int{}
	for _, q := range reqs {
		byURL[q.DataURL]++
		if q.Prompt != "Describe the image" || q.Model != "gpt-test" || q.Path != "/v1/chat/completions" {
			t.Errorf("request %+v", q)
		}
	}
	for _, r := range rows {
		want := 0
		switch {
		case r.format != 0 && r.id == 11:
			want = 2
		case r.format != 0:
			want = 1
		}
		if r.format != 0 {
			url := magic.DataURL(r.format, r.img)
			if !hasPrefix(url, r.format.MIME()) {
				t.Fatalf("bad data URL for row %d", r.id)
			}
			if byURL[url] != want {
				t.Errorf("row %d: %d requests with its data URL, want %d", r.id, byURL[url], want)
			}
		}
	}
	// The strict model's rule: every image is too large (60 bytes) or not
	// PNG, so it never reaches the provider; its requests would carry no
	// other model, so the total proves it.
	if len(reqs) != 8 {
		t.Errorf("%d requests in total, want 8 (5 images, one 400, two 503)", len(reqs))
	}

	for _, r := range rows {
		var caption *string
		if err := s.conn.QueryRow(context.Background(), "SELECT caption FROM public.captions WHERE id = $1", r.id).Scan(&caption); err != nil {
			t.Fatalf("row %d: %v", r.id, err)
		}
		switch r.reason {
		case "":
			if caption == nil || *caption != captionOf(magic.DataURL(r.format, r.img)) {
				t.Errorf("row %d: caption %v", r.id, caption)
			}
		default:
			if caption != nil {
				t.Errorf("row %d: caption %q, want NULL", r.id, *caption)
			}
		}
		var reason, detail string
		var n *int
		var head []byte
		err := s.conn.QueryRow(context.Background(), `SELECT reason, detail, image_bytes, image_head FROM pgimageai.errors
WHERE rule = 'caption' AND source_table = 'public.photos' AND source_key = jsonb_build_object('id', $1::int) AND resolved_at IS NULL`, r.id).Scan(&reason, &detail, &n, &head)
		if r.reason == "" || r.reason == "-" {
			if err == nil {
				t.Errorf("row %d: unexpected errors row %s: %s", r.id, reason, detail)
			}
			continue
		}
		if err != nil {
			t.Fatalf("row %d: errors row: %v", r.id, err)
		}
		wantHead := r.img[:min(16, len(r.img))]
		if reason != r.reason || n == nil || *n != len(r.img) || !bytes.Equal(head, wantHead) {
			t.Errorf("row %d: errors row %s bytes=%v head=%x, want %s %d %x", r.id, reason, n, head, r.reason, len(r.img), wantHead)
		}
		if r.id == 10 && !strings.Contains(detail, "400") {
			t.Errorf("row 10 detail %q lacks the status", detail)
		}
		if r.id == 11 && !strings.Contains(detail, "503") {
			t.Errorf("row 11 detail %q lacks the status", detail)
		}
	}
	// The strict rule: too_large for the big images, unsupported_format for
	// the small WebP; NULL and bad images as for any rule.
	strict := map[int]string{}
	rs, err := s.conn.Query(context.Background(), `SELECT (source_key->>'id')::int, reason FROM pgimageai.errors WHERE rule = 'strict' AND resolved_at IS NULL`)
	if err != nil {
		t.Fatal(err)
	}
	for rs.Next() {
		var id int
		var reason string
		rs.Scan(&id, &reason)
		strict[id] = reason
	}
	for _, r := range rows {
		want := r.reason
		switch {
		case r.format == magic.WebP:
			want = "unsupported_format"
		case r.format != 0:
			want = "too_large"
		case want == "-":
			want = ""
		}
		if strict[r.id] != want {
			t.Errorf("strict rule row %d: reason %q, want %q", r.id, strict[r.id], want)
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
}

// TestRowLifecycle covers the UPDATE, DELETE, key change and TRUNCATE rows of
// the function semantics, with a TOASTed image.
func TestRowLifecycle(t *testing.T) {
	s := newSource(t)
	s.exec(t, "ALTER TABLE public.photos ALTER COLUMN img SET STORAGE EXTERNAL")
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.rule(t, "caption", "vision", "captions", "caption")
	s.start(t, s.config(t))

	big := append(pngImage(t, 1), integration.RandomBytes(t, 100<<10)...) // TOASTed out of line
	s.exec(t, "INSERT INTO public.photos (id, img, note) VALUES (1, $1, 'first'), (2, $2, 'second')", big, jpegImage(t, 2))
	s.sync(t, 30*time.Second)
	want1 := captionOf(magic.DataURL(magic.PNG, big))
	assertCaption(t, s, 1, want1)
	if ai.Count() != 2 {
		t.Fatalf("%d requests after two inserts", ai.Count())
	}

	// UPDATE of another column: the image arrives as unchanged TOAST.
	s.exec(t, "UPDATE public.photos SET note = 'edited' WHERE id = 1")
	s.sync(t, 30*time.Second)
	if ai.Count() != 2 {
		t.Fatalf("UPDATE of note made a request (%d)", ai.Count())
	}
	assertCaption(t, s, 1, want1)

	// UPDATE of the image: a new result.
	next := pngImage(t, 11)
	s.exec(t, "UPDATE public.photos SET img = $1 WHERE id = 1", next)
	s.sync(t, 30*time.Second)
	if ai.Count() != 3 {
		t.Fatalf("%d requests after the image update, want 3", ai.Count())
	}
	assertCaption(t, s, 1, captionOf(magic.DataURL(magic.PNG, next)))

	// Primary-key change: the target row moves.
	s.exec(t, "UPDATE public.photos SET id = 20 WHERE id = 2")
	s.sync(t, 30*time.Second)
	assertCaption(t, s, 20, captionOf(magic.DataURL(magic.JPEG, jpegImage(t, 2))))
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.captions WHERE id = 2"); n != 0 {
		t.Fatalf("old key still in target")
	}
	if ai.Count() != 3 {
		t.Fatalf("key change made a request (%d)", ai.Count())
	}

	// DELETE removes the target row.
	s.exec(t, "DELETE FROM public.photos WHERE id = 1")
	s.sync(t, 30*time.Second)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.captions WHERE id = 1"); n != 0 {
		t.Fatalf("deleted row still in target")
	}

	// TRUNCATE empties the target.
	s.exec(t, "TRUNCATE public.photos")
	s.sync(t, 30*time.Second)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.captions"); n != 0 {
		t.Fatalf("%d rows left after TRUNCATE", n)
	}
}

func assertCaption(t testing.TB, s *source, id int, want string) {
	t.Helper()
	var got *string
	if err := s.conn.QueryRow(context.Background(), "SELECT caption FROM public.captions WHERE id = $1", id).Scan(&got); err != nil {
		t.Fatalf("caption of %d: %v", id, err)
	}
	if got == nil || *got != want {
		t.Fatalf("caption of %d = %v, want %q", id, got, want)
	}
}
