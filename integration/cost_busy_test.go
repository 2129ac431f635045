package integration_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/magic"
)

// TestNeverPayTwiceBusyRows (what TestChaosNeverPayTwice found):
// after a SIGKILL and a restart — the cache empty — a row changed several
// times in a row, each change read while the one before still waits in its
// lane, pays nothing when its image did not change: two note-only updates,
// a key move and a note-only update at the new key of each of 200 rows make
// no call, and 20 rows whose image changes first pay one call each,
// whatever follows.
func TestNeverPayTwiceBusyRows(t *testing.T) {
	s, ai, _ := captionedThenKilled(t, 200, 50)
	paid := ai.Count()

	// The backlog the restarted bridge reads: per row, in one transaction,
	// a note-only update (the image column not named), one that rewrites
	// the same bytes, a key move and a note-only update at the new key;
	// rows 1-20 get a new image first.
	ctx := context.Background()
	b := &pgx.Batch{}
	moved := map[int]string{}
	for id := 1; id <= 200; id++ {
		img := pngImage(t, id)
		if id <= 20 {
			img = pngImage(t, 10000+id)
			b.Queue("UPDATE public.photos SET img = $1 WHERE id = $2", img, id)
		}
		b.Queue("UPDATE public.photos SET note = 'one' WHERE id = $1", id)
		b.Queue("UPDATE public.photos SET note = 'two', img = $1 WHERE id = $2", img, id)
		b.Queue("UPDATE public.photos SET id = $1 WHERE id = $2", id+1000, id)
		b.Queue("UPDATE public.photos SET note = 'three' WHERE id = $1", id+1000)
		moved[id+1000] = captionOf(magic.DataURL(magic.PNG, img))
	}
	if err := pgx.BeginFunc(ctx, s.conn, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() }); err != nil {
		t.Fatal(err)
	}
	s.runProcess(t)
	s.sync(t, 120*time.Second)
	if n := ai.Count() - paid; n != 20 {
		t.Errorf("%d requests for 20 new images among 1,020 changes of 200 rows read back to back after a restart, want 20", n)
	}
	byID, foreign := requestsByID(t, ai, 10001, 10021)
	for id := 10001; id <= 10020; id++ {
		if byID[id] != 1 {
			t.Errorf("new image of row %d: %d requests, want 1", id-10000, byID[id])
		}
	}
	if foreign != paid {
		t.Errorf("%d requests for images other than the 20 new ones, want the %d of the first run", foreign, paid)
	}
	assertCaptions(t, captions(t, s.conn), moved)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors"); n != 0 {
		t.Errorf("%d errors rows", n)
	}
}
