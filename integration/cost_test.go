package integration_test

import (
	"syscall"
	"testing"
	"time"
)

// TestNeverPayTwice (issue 15): 1,000 rows are captioned; after a SIGKILL
// and a restart with an empty cache, an update of every row's note and a
// move of every key make zero calls, and so does the full backfill of the
// unchanged rows after recover-slot — the stored input of each result says
// nothing changed.
func TestNeverPayTwice(t *testing.T) {
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{"max_concurrency": 16}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	p1 := s.runProcess(t)
	want := map[int]string{}
	insertRows(t, s, 1, 1001, 100, want)
	s.sync(t, 120*time.Second)
	assertCaptions(t, captions(t, s.conn), want)
	p1.signal(t, syscall.SIGKILL)
	paid := ai.Count()
	if paid != 1000 {
		t.Fatalf("%d requests for 1000 rows", paid)
	}

	p2 := s.runProcess(t) // a new process: nothing in its cache
	s.exec(t, "UPDATE public.photos SET note = 'edited'")
	s.sync(t, 120*time.Second)
	if n := ai.Count() - paid; n != 0 {
		t.Errorf("%d requests after a note-only update of every row, want 0", n)
	}
	s.exec(t, "UPDATE public.photos SET id = id + 100000")
	s.sync(t, 120*time.Second)
	if n := ai.Count() - paid; n != 0 {
		t.Errorf("%d requests after every key moved, want 0", n)
	}
	moved := map[int]string{}
	for id, c := range want {
		moved[id+100000] = c
	}
	assertCaptions(t, captions(t, s.conn), moved)
	paid = ai.Count()
	if err := p2.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v", err)
	}

	runCLI(t, s, "recover-slot", "--force", "--publication", s.slot)
	s.runProcess(t)
	waitFor(t, 120*time.Second, "the backfill after recover-slot", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.backfills WHERE rule = 'caption' AND state = 'done' AND rows_done = 1000") == 1
	})
	s.sync(t, 60*time.Second)
	if n := ai.Count() - paid; n != 0 {
		t.Errorf("%d requests for the backfill of 1000 unchanged rows, want 0", n)
	}
	assertCaptions(t, captions(t, s.conn), moved)
	// A changed image still costs its call, and a row whose result was
	// deleted by hand is computed again.
	s.exec(t, "UPDATE public.photos SET img = $1 WHERE id = 100001", pngImage(t, 5000))
	s.exec(t, "DELETE FROM public.captions WHERE id = 100002")
	s.exec(t, "UPDATE public.photos SET note = 'again' WHERE id = 100002")
	s.sync(t, 60*time.Second)
	if n := ai.Count() - paid; n != 2 {
		t.Errorf("%d requests for a new image and a deleted result, want 2", n)
	}
	if got := captions(t, s.conn); got[100002] != moved[100002] || got[100001] == moved[100001] {
		t.Errorf("after a new image and a deleted result: %q and %q", got[100001], got[100002])
	}
}
