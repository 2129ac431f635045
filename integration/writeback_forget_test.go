package integration_test

import (
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/integration"
)

// TestWriteBackForgetsDeletedRows: a write-back rule's stored inputs
// (pgimageai.results) and open errors of rows deleted from the table go
// with them, and a truncate forgets them all — a write-back table used as a
// queue leaves nothing behind.
func TestWriteBackForgetsDeletedRows(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.exec(t, `INSERT INTO pgimageai.rules VALUES ('wb', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'vision', 'Describe', 'public.photos', 'note')`)
	want := map[int]string{}
	insertRows(t, s, 1, 6, 5, want)
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (6, ''::bytea)")
	_, stop := s.start(t, s.config(t))
	integration.WaitFor(t, 30*time.Second, "5 notes", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM public.photos WHERE note IS NOT NULL") == 5
	})
	s.sync(t, 30*time.Second)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.results WHERE rule = 'wb'"); n != 5 {
		t.Fatalf("%d stored inputs, want 5", n)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE rule = 'wb' AND resolved_at IS NULL"); n != 1 {
		t.Fatalf("%d open errors, want 1 (the empty image)", n)
	}

	s.exec(t, "DELETE FROM public.photos WHERE id IN (1, 2, 6)")
	s.sync(t, 30*time.Second)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.results WHERE rule = 'wb'"); n != 3 {
		t.Errorf("%d stored inputs after deleting 2 of the rows, want 3", n)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE rule = 'wb' AND resolved_at IS NULL"); n != 0 {
		t.Errorf("%d open errors after deleting the failed row, want 0", n)
	}

	s.exec(t, "TRUNCATE public.photos")
	s.sync(t, 30*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.results WHERE rule = 'wb'"); n != 0 {
		t.Errorf("%d stored inputs after a truncate, want 0", n)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.photos"); n != 0 {
		t.Errorf("the write-back brought %d rows back", n)
	}
}
