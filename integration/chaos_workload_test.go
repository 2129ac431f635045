package integration_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/magic"
)

// The workload of the chaos run (chaos_test.go): random transactions on
// public.photos of small inline PNGs (8x8 pixels, a few hundred bytes: never
// TOASTed, so pgoutput carries the image in every UPDATE), with an exact
// model of the table and an exact count of image changes.
//
// An image change is a (row, image) input that needs a result: each INSERT
// (every insert has an image), and each UPDATE whose image bytes differ from
// the row's bytes just before it. A note-only UPDATE — the image column not
// named, or set again to the same bytes — and a key move that keeps the
// image are not image changes, nor is a DELETE. Every image change carries
// bytes no other change carried (a new seed), so the ideal run makes exactly
// one provider call per image change.

// opKind is one kind of statement of the workload.
type opKind int

const (
	opInsert      opKind = iota // INSERT of a new row: an image change
	opImage                     // UPDATE to new image bytes: an image change
	opNote                      // UPDATE of the note only, the image column not named
	opNoteRewrite               // UPDATE of the note and of the image, to the same bytes
	opDelete                    // DELETE
	opMove                      // UPDATE of the primary key, the image kept
	opKinds
)

func (k opKind) String() string {
	return [...]string{"insert", "image update", "note-only update", "note update rewriting the same image", "delete", "key move"}[k]
}

// opWeights is how often each kind is drawn (when the table has rows).
var opWeights = [opKinds]int{opInsert: 20, opImage: 20, opNote: 18, opNoteRewrite: 14, opDelete: 12, opMove: 16}

// chaosImage is one image of the run: the bytes of one image change.
type chaosImage struct {
	dataURL string
	carried [opKinds]int // statements that carried it again without changing it (note updates, key moves)
}

// workload generates the transactions and keeps the model. It is used by
// one goroutine.
type workload struct {
	rng  *rand.Rand
	conn *pgx.Conn
	// interval is the mean pause between transactions.
	interval time.Duration

	rows  map[int]int // id -> seed of its current image
	ids   []int       // the keys of rows, for a random pick
	at    map[int]int // id -> index in ids
	freed []int       // keys deleted or moved away, reused by inserts and moves
	next  int         // the next fresh key
	seed  int         // the last image seed used

	images map[int]*chaosImage // by seed
	bytes  map[int][]byte      // by seed, of the current rows only
	ops    [opKinds]int
	txs    int
	// imageChanges counts the image changes committed (see above).
	imageChanges int
}

func newWorkload(conn *pgx.Conn, seed uint64, interval time.Duration) *workload {
	return &workload{
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), conn: conn, interval: interval,
		rows: map[int]int{}, at: map[int]int{}, next: 1, images: map[int]*chaosImage{}, bytes: map[int][]byte{},
	}
}

// chaosCaption is the fake provider's answer for an image: distinct per
// image.
func chaosCaption(dataURL string) string { return captionOf(dataURL) }

// newImage makes the bytes of a new image change.
func (w *workload) newImage(t testing.TB) int {
	w.seed++
	img := pngImage(t, w.seed)
	w.bytes[w.seed] = img
	w.images[w.seed] = &chaosImage{dataURL: magic.DataURL(magic.PNG, img)}
	return w.seed
}

func (w *workload) addRow(id, seed int) {
	w.rows[id] = seed
	w.at[id] = len(w.ids)
	w.ids = append(w.ids, id)
}

func (w *workload) removeRow(id int) int {
	seed := w.rows[id]
	i := w.at[id]
	last := w.ids[len(w.ids)-1]
	w.ids[i], w.at[last] = last, i
	w.ids = w.ids[:len(w.ids)-1]
	delete(w.at, id)
	delete(w.rows, id)
	return seed
}

// freeKey returns a key no row has: a freed one (30%) or a fresh one.
func (w *workload) freeKey() int {
	if len(w.freed) > 0 && w.rng.IntN(10) < 3 {
		i := w.rng.IntN(len(w.freed))
		id := w.freed[i]
		w.freed[i] = w.freed[len(w.freed)-1]
		w.freed = w.freed[:len(w.freed)-1]
		return id
	}
	w.next++
	return w.next - 1
}

// pick draws the kind of the next statement: inserts only while the table
// is small.
func (w *workload) pick(minRows int) opKind {
	if len(w.ids) < minRows {
		return opInsert
	}
	total := 0
	for _, n := range opWeights {
		total += n
	}
	n := w.rng.IntN(total)
	for k, weight := range opWeights {
		if n < weight {
			return opKind(k)
		}
		n -= weight
	}
	return opInsert
}

// queue adds one statement of kind k to b and applies it to the model; prev,
// when it still exists, is the row the statement touches (a transaction
// that works on one row), otherwise a random row. It returns the key of the
// row the statement leaves behind (0 after a delete).
func (w *workload) queue(t testing.TB, b *pgx.Batch, k opKind, prev int) int {
	id := prev
	if _, ok := w.rows[id]; !ok && k != opInsert {
		id = w.ids[w.rng.IntN(len(w.ids))]
	}
	w.ops[k]++
	note := fmt.Sprintf("note %d", w.rng.Int())
	switch k {
	case opInsert:
		id = w.freeKey()
		seed := w.newImage(t)
		w.addRow(id, seed)
		w.imageChanges++
		b.Queue("INSERT INTO public.photos (id, img, note) VALUES ($1, $2, $3)", id, w.bytes[seed], note)
	case opImage:
		old := w.rows[id]
		seed := w.newImage(t)
		w.rows[id] = seed
		delete(w.bytes, old)
		w.imageChanges++
		b.Queue("UPDATE public.photos SET img = $1 WHERE id = $2", w.bytes[seed], id)
	case opNote:
		w.images[w.rows[id]].carried[k]++
		b.Queue("UPDATE public.photos SET note = $1 WHERE id = $2", note, id)
	case opNoteRewrite:
		seed := w.rows[id]
		w.images[seed].carried[k]++
		// The same bytes, sent again from the client: pgoutput carries them
		// like new ones.
		b.Queue("UPDATE public.photos SET note = $1, img = $2 WHERE id = $3", note, w.bytes[seed], id)
	case opDelete:
		delete(w.bytes, w.removeRow(id))
		w.freed = append(w.freed, id)
		b.Queue("DELETE FROM public.photos WHERE id = $1", id)
		return 0
	case opMove:
		to := w.freeKey()
		seed := w.removeRow(id)
		w.images[seed].carried[k]++
		w.addRow(to, seed)
		w.freed = append(w.freed, id)
		b.Queue("UPDATE public.photos SET id = $1 WHERE id = $2", to, id)
		return to
	}
	return id
}

// tx commits one random transaction: half of them one statement, the others
// two to six, which work on one row with a chance of 40% per statement (an
// insert then its updates, a move then a note).
func (w *workload) tx(ctx context.Context, t testing.TB, minRows int) error {
	b := &pgx.Batch{}
	n := 1
	if w.rng.IntN(2) == 0 {
		n = 2 + w.rng.IntN(5)
	}
	prev := 0
	for range n {
		if w.rng.IntN(10) >= 4 {
			prev = 0
		}
		prev = w.queue(t, b, w.pick(minRows), prev)
	}
	w.txs++
	return pgx.BeginFunc(ctx, w.conn, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() })
}

// run commits transactions until ctx ends, pausing a random time (mean
// w.interval) between them. An error is a failed transaction: the model is
// then wrong, and the run void.
func (w *workload) run(ctx context.Context, t testing.TB, minRows int) error {
	for {
		pause := time.Duration(w.rng.Int64N(int64(2*w.interval) + 1))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pause):
		}
		if err := w.tx(context.WithoutCancel(ctx), t, minRows); err != nil {
			return fmt.Errorf("transaction %d: %w", w.txs, err)
		}
	}
}

// want returns the expected target: every current row's caption.
func (w *workload) want() map[int]string {
	want := make(map[int]string, len(w.rows))
	for id, seed := range w.rows {
		want[id] = chaosCaption(w.images[seed].dataURL)
	}
	return want
}
